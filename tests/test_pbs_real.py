"""The PBS profiles against a REAL PBS Pro server (OpenPBS 23.06, ``.ci/pbs-up.sh``).

Every test runs what a user types -- ``snakemake --profile profiles/cheyenne`` (casper,
derecho) -- or the profile's own submit/status commands, with ``/opt/pbs/bin`` first on
PATH, and reads back what PBS ran from ``qstat -x -f -F json``. Slurm's Torque wrappers
(``/usr/bin/qsub``) are never used: :func:`pbs_env` asserts that ``qsub``, ``qstat`` and
``qdel`` resolve to ``/opt/pbs/bin``. These tests FAIL (never skip) when PBS is not up; as
root, the session fixture starts it with ``.ci/pbs-up.sh`` first.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import ROOT
from test_slurm import ROWS, count_rows, declared_jobs, workdir
from test_workflow import SMALL

pytestmark = [pytest.mark.pbs, pytest.mark.integration]

PBS_BIN = Path("/opt/pbs/bin")
QSTAT, QSUB, QDEL = (str(PBS_BIN / n) for n in ("qstat", "qsub", "qdel"))
ACCOUNT = "ncreel"
FRAMES = 240  # time steps of the sample
# Test-only: poll PBS more often than the profiles do (they are tuned for NCAR's big
# shared servers), and do not wait for a shared file system.
FAST = ["--seconds-between-status-checks", "2", "--latency-wait", "5"]


def _pbs_up() -> bool:
    ok = PBS_BIN.joinpath("qstat").exists() and subprocess.run(
        [QSTAT, "-Q", "share"], capture_output=True).returncode == 0
    return ok


@pytest.fixture(scope="session")
def pbs() -> str:
    """A working PBS Pro server with ncreel's queues; started with .ci/pbs-up.sh as root.

    Returns the server's name (the suffix of its job ids).
    """
    if not _pbs_up() and os.geteuid() == 0:
        subprocess.run(["bash", str(ROOT / ".ci/pbs-up.sh")], check=False)
    if not _pbs_up():
        pytest.fail("PBS Pro is not running (or has no `share` queue): run "
                    "`sudo bash .ci/pbs-up.sh` (see README.md, section Clusters)")
    doc = json.loads(subprocess.run([QSTAT, "-B", "-f", "-F", "json"], capture_output=True,
                                    text=True, check=True).stdout)
    return next(iter(doc["Server"]))


def pbs_env(**extra) -> dict:
    """The environment of a user with PBS Pro's commands first on PATH."""
    e = dict(os.environ)
    e.pop("SNAKEMAKE_PROFILE", None)
    for k in ("PBS_ACCOUNT", "NCREEL_PBS_QUEUE"):
        e.pop(k, None)
    e["PATH"] = f"{PBS_BIN}:{Path(sys.executable).parent}:{e.get('PATH', '')}"
    e.update({k: v for k, v in extra.items() if v is not None})
    for cmd in ("qsub", "qstat", "qdel"):
        assert shutil.which(cmd, path=e["PATH"]) == str(PBS_BIN / cmd), cmd
    return e


def snakemake(work: Path, *args, check=True, timeout=900, **envs) -> str:
    cmd = [sys.executable, "-m", "snakemake", *FAST, *args]
    proc = subprocess.run(cmd, cwd=work, capture_output=True, text=True,
                          env=pbs_env(**envs), timeout=timeout)
    out = proc.stdout + proc.stderr
    (work / "snakemake.out").write_text(out)
    if check and proc.returncode != 0:
        raise AssertionError(f"{' '.join(cmd)} failed:\n{out[-6000:]}")
    if not check:
        assert proc.returncode != 0, f"{' '.join(cmd)} should have failed:\n{out[-3000:]}"
    return out


def submitted(log: str) -> dict[str, str]:
    """PBS job id -> Snakemake job id (cluster-generic's "external jobid" lines)."""
    return {pbs_id: sm for sm, pbs_id in
            re.findall(r"Submitted (?:group )?job (\S+) with external jobid '([^']+)'", log)}


def qstat_doc(jobid: str) -> dict:
    """The ``qstat -x -f -F json`` document of one job (finished ones included)."""
    proc = subprocess.run([QSTAT, "-x", "-f", "-F", "json", jobid], capture_output=True,
                          text=True, timeout=60)
    return json.loads(proc.stdout) if proc.stdout.strip() else {}


def qstat_jobs(*ids: str) -> dict[str, dict]:
    """``qstat -x -f -F json`` records of `ids`, one query each: given several finished
    jobs, OpenPBS 23.06's ``qstat -x -f -F json`` prints only the first."""
    jobs = {}
    for jobid in ids:
        jobs.update(qstat_doc(jobid).get("Jobs", {}))
    return jobs


def wait_finished(*ids: str, timeout=180) -> dict[str, dict]:
    deadline = time.time() + timeout
    while True:
        jobs = qstat_jobs(*ids)
        if len(jobs) == len(ids) and all(j["job_state"] == "F" for j in jobs.values()):
            return jobs
        assert time.time() < deadline, {k: j["job_state"] for k, j in jobs.items()}
        time.sleep(1)


def frame_count(movie: Path) -> int:
    out = subprocess.run(["ffprobe", "-v", "error", "-count_frames", "-select_streams", "v:0",
                          "-show_entries", "stream=nb_read_frames", "-of", "json", str(movie)],
                         capture_output=True, text=True, check=True).stdout
    return int(json.loads(out)["streams"][0]["nb_read_frames"])


def check_jobs(log: str, queue: str, expect_rules: dict[str, int]) -> dict[str, dict]:
    """Every job Snakemake submitted is in qstat -x, finished with Exit_status 0, asked for
    its rule's mem_mb and threads, in `queue` under the test account."""
    ids = submitted(log)
    declared = declared_jobs(log)
    jobs = wait_finished(*ids)
    seen: dict[str, int] = {}
    for pbs_id, sm_id in ids.items():
        rec = jobs[pbs_id]
        want = declared[sm_id][-1]
        seen[want["rule"]] = seen.get(want["rule"], 0) + 1
        assert rec["Exit_status"] == 0, (pbs_id, rec.get("comment"))
        assert rec["Resource_List"]["mem"] == f"{want['mem_mb']}mb", (pbs_id, want)
        assert rec["Resource_List"]["ncpus"] == want["threads"], (pbs_id, want)
        assert rec["queue"] == queue and rec["Account_Name"] == ACCOUNT, pbs_id
        assert rec["Job_Name"].startswith(f"nc_{want['rule']}"), rec["Job_Name"]
    assert seen == expect_rules
    return jobs


def test_cheyenne_profile_end_to_end(pbs, tmp_path_factory, sample_nc):
    """The demo through ``--profile profiles/cheyenne`` on PBS Pro, nothing overridden:
    the ``share`` queue exists here as on Cheyenne."""
    work = workdir(tmp_path_factory, sample_nc, "pbs_cheyenne")
    log = snakemake(work, "--profile", "profiles/cheyenne", "--config", *SMALL,
                    "frames_per_shard=120", PBS_ACCOUNT=ACCOUNT)
    check_jobs(log, "share", {"statistics": 1, "calibrate_render": 1, "render_shard": 2,
                              "reduce_cells": 1, "encode_movie": 1, "preview": 1})
    assert count_rows(work / "results/demo/cells.copy") == ROWS
    assert frame_count(work / "results/demo/movie.mp4") == FRAMES
    assert not list(work.glob("results/demo/**/*.part"))


# casper and derecho differ from cheyenne only in the options of the same submit command
# (queue, walltime cap, whole-node request), so one real job each shows what PBS makes of
# them; the full demo through the same submit/status/cancel commands runs above.
def test_casper_profile_runs_a_job(pbs, tmp_path_factory, sample_nc):
    """``--profile profiles/casper``: a real job in the ``casper`` queue, Exit_status 0."""
    work = workdir(tmp_path_factory, sample_nc, "pbs_casper")
    log = snakemake(work, "--profile", "profiles/casper", "--config", *SMALL, "--",
                    "results/demo/stats.json", PBS_ACCOUNT=ACCOUNT)
    jobs = check_jobs(log, "casper", {"statistics": 1})
    assert [j["Resource_List"]["walltime"] for j in jobs.values()] == ["00:05:00"]
    assert json.loads((work / "results/demo/stats.json").read_text())


def test_derecho_profile_asks_for_a_whole_node(pbs, tmp_path_factory, sample_nc):
    """``--profile profiles/derecho`` asks PBS for a whole 128-core, 235 GB node in ``main``.
    PBS accepts the request and, this node being smaller, keeps it queued ("Can Never
    Run: Insufficient amount of resource"): what PBS does with it, not just the qsub line."""
    work = workdir(tmp_path_factory, sample_nc, "pbs_derecho")
    with subprocess.Popen([sys.executable, "-m", "snakemake", *FAST, "--profile",
                           "profiles/derecho", "--config", *SMALL, "--",
                           "results/demo/stats.json"], cwd=work, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, start_new_session=True,
                          env=pbs_env(PBS_ACCOUNT=ACCOUNT)) as proc:
        try:
            deadline, out = time.time() + 300, ""
            while not submitted(out):
                assert time.time() < deadline and proc.poll() is None, out
                out += proc.stdout.readline()
            (jobid,) = submitted(out)
            while "Can Never Run" not in (rec := qstat_jobs(jobid)[jobid]).get("comment", ""):
                assert time.time() < deadline, rec
                time.sleep(1)
        finally:
            os.killpg(proc.pid, 9)
    subprocess.run([QDEL, jobid], check=True)
    assert rec["queue"] == "main" and rec["job_state"] == "Q"
    assert rec["Resource_List"]["ncpus"] == 128 and rec["Resource_List"]["mem"] == "235gb"
    assert "Insufficient amount of resource" in rec["comment"]
    assert wait_finished(jobid)[jobid]["job_state"] == "F"
