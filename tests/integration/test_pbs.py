"""The PBS profiles against a REAL PBS Pro server (OpenPBS 23.06, ``.ci/pbs-up.sh``).

Every test runs what a user types -- ``snakemake --profile profiles/cheyenne`` (casper,
derecho) -- or the profile's own submit/status commands, with ``/opt/pbs/bin`` first on
PATH, and reads back what PBS ran from ``qstat -x -f -F json``. Slurm's Torque wrappers
(``/usr/bin/qsub``) are never used: :func:`pbs_env` asserts that ``qsub``, ``qstat`` and
``qdel`` resolve to ``/opt/pbs/bin``. These tests FAIL (never skip) when PBS is not up; as
root, the session fixture starts it with ``.ci/pbs-up.sh`` first.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import ROOT
from snakemake_executor_plugin_pbs_pro.submit_string import DEFAULT_JOB_OVERHEAD_MB, request_mem_mb
from test_slurm import ROWS, _incomplete, count_rows, declared_jobs, workdir
from workflow_run import SMALL, make_workdir

pytestmark = [pytest.mark.pbs, pytest.mark.integration]

PBS_BIN = Path("/opt/pbs/bin")
QSTAT, QSUB, QDEL = (str(PBS_BIN / n) for n in ("qstat", "qsub", "qdel"))
ACCOUNT = "ncreel"
FRAMES = 240  # time steps of the sample
# Test-only: poll PBS more often than the profiles do (they are tuned for NCAR's big
# shared servers), and do not wait for a shared file system.
FAST = ["--seconds-between-status-checks", "2", "--latency-wait", "5"]
#: Exit_status of a running job deleted with qdel: its SIGTERM, or the SIGKILL that follows
#: kill_delay later when the job outlives it (a SIGTERM that arrives while the job's shell
#: is still starting), ends the job's top shell (256 + signal: 271, 265) or the command it
#: runs while the shell lives on (the shell's 128 + signal: 143, 137). Which one varies from
#: run to run; each is `failed`.
QDEL_OF_A_RUNNING_JOB = (271, 143, 265, 137)


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
                    "`sudo bash .ci/pbs-up.sh` (see docs/development.md)")
    doc = json.loads(subprocess.run([QSTAT, "-B", "-f", "-F", "json"], capture_output=True,
                                    text=True, check=True).stdout)
    return next(iter(doc["Server"]))


def pbs_env(**extra) -> dict:
    """The environment of a user with PBS Pro's commands first on PATH."""
    e = dict(os.environ)
    e.pop("SNAKEMAKE_PROFILE", None)
    for k in ("PBS_ACCOUNT", "SNAKEMAKE_PBS_PRO_QUEUE"):
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


def job_overhead_mb(rec: dict) -> int:
    """MB the pbs-pro executor added to a job's mem for the job's own Snakemake process, as
    it told the job (``SNAKEMAKE_PBS_PRO_JOB_OVERHEAD_MB`` in ``qstat``'s Variable_List)."""
    env = rec["Variable_List"]
    if isinstance(env, str):  # the text form of qstat -f: "A=1,B=2"
        env = dict(kv.split("=", 1) for kv in env.split(",") if "=" in kv)
    return int(env["SNAKEMAKE_PBS_PRO_JOB_OVERHEAD_MB"])


def check_jobs(log: str, queue: str, expect_rules: dict[str, int]) -> dict[str, dict]:
    """Every job Snakemake submitted is in qstat -x, finished with Exit_status 0, asked for
    its rule's mem_mb (with the executor's overhead for the job's own Snakemake) and
    threads, in `queue` under the test account."""
    ids = submitted(log)
    declared = declared_jobs(log)
    jobs = wait_finished(*ids)
    seen: dict[str, int] = {}
    for pbs_id, sm_id in ids.items():
        rec = jobs[pbs_id]
        want = declared[sm_id][-1]
        seen[want["rule"]] = seen.get(want["rule"], 0) + 1
        assert rec["Exit_status"] == 0, (pbs_id, rec.get("comment"))
        extra = job_overhead_mb(rec)  # the profile's pbs-pro-job-overhead-mb
        assert extra >= DEFAULT_JOB_OVERHEAD_MB, (pbs_id, extra)
        assert rec["Resource_List"]["mem"] == f"{request_mem_mb(want['mem_mb'], extra)}mb", \
            (pbs_id, want)
        assert rec["Resource_List"]["ncpus"] == want["threads"], (pbs_id, want)
        assert rec["queue"] == queue and rec["Account_Name"] == ACCOUNT, pbs_id
        assert rec["Job_Name"].startswith(f"nc_{want['rule']}"), rec["Job_Name"]
    assert seen == expect_rules
    return jobs


@pytest.fixture(scope="module")
def cheyenne_demo(pbs, tmp_path_factory, sample_nc) -> tuple[Path, str]:
    """The demo run once through ``--profile profiles/cheyenne``; (workdir, its log)."""
    work = workdir(tmp_path_factory, sample_nc, "pbs_cheyenne")
    return work, snakemake(work, "--profile", "profiles/cheyenne", "--config", *SMALL,
                           "frames_per_shard=120", PBS_ACCOUNT=ACCOUNT)


def test_cheyenne_profile_end_to_end(cheyenne_demo):
    """The demo through ``--profile profiles/cheyenne`` on PBS Pro, nothing overridden:
    the ``share`` queue exists here as on Cheyenne."""
    work, log = cheyenne_demo
    check_jobs(log, "share", {"statistics": 1, "calibrate_render": 1, "process_shard": 2,
                              "reduce_cells": 1, "concat_segments": 1, "preview": 1})
    assert count_rows(work / "results/demo/cells.copy") == ROWS
    assert frame_count(work / "results/demo/movie.mp4") == FRAMES
    assert not list(work.glob("results/demo/**/*.part"))


def test_casper_profile_end_to_end(pbs, tmp_path_factory, sample_nc):
    """The whole demo through ``--profile profiles/casper``, nothing overridden (a
    ``casper`` queue exists here): every job, the two shards' array sub-jobs included,
    in ``qstat -x`` with its rule's mem_mb and threads, walltime within Casper's 24 h,
    Exit_status 0; the movie and COPY file exact."""
    work = workdir(tmp_path_factory, sample_nc, "pbs_casper")
    log = snakemake(work, "--profile", "profiles/casper", "--config", *SMALL,
                    "frames_per_shard=120", PBS_ACCOUNT=ACCOUNT)
    check_jobs(log, "casper", {"statistics": 1, "calibrate_render": 1, "process_shard": 2,
                               "reduce_cells": 1, "concat_segments": 1, "preview": 1})
    assert len(re.findall(r"as PBS job array \S+ ", log)) == 1  # the two shards
    assert count_rows(work / "results/demo/cells.copy") == ROWS
    assert frame_count(work / "results/demo/movie.mp4") == FRAMES


#: Derecho's CPU nodes (NCAR: 128 cores, 235 GB usable), what profiles/derecho asks for.
DERECHO_NODE = {"ncpus": "128", "mem": "240gb"}


def _node_resources(node: str) -> dict[str, str]:
    doc = json.loads(subprocess.run([str(PBS_BIN / "pbsnodes"), "-av", "-F", "json"],
                                    capture_output=True, text=True, check=True).stdout)
    avail = doc["nodes"][node]["resources_available"]
    return {k: str(avail[k]) for k in DERECHO_NODE}


@pytest.fixture
def derecho_sized_node(pbs):
    """This machine's one PBS vnode, made to advertise a Derecho node's 128 cores and
    240 GB, so that whole-node jobs can run (MoM still enforces each job's own mem).
    The values it had come back afterwards."""
    qmgr = str(PBS_BIN / "qmgr")
    doc = json.loads(subprocess.run([str(PBS_BIN / "pbsnodes"), "-av", "-F", "json"],
                                    capture_output=True, text=True, check=True).stdout)
    (node,) = doc["nodes"]
    before = _node_resources(node)
    try:
        for key, value in DERECHO_NODE.items():
            subprocess.run([qmgr, "-c", f"set node {node} resources_available.{key}={value}"],
                           check=True)
        yield node
    finally:
        # Set back as seen (``unset`` leaves mem missing until MoM reports it again, and
        # then no job asking for mem can run).
        for key, value in before.items():
            subprocess.run([qmgr, "-c", f"set node {node} resources_available.{key}={value}"],
                           check=True)
        assert _node_resources(node) == before


def test_derecho_profile_end_to_end(derecho_sized_node, tmp_path_factory, sample_nc):
    """The whole demo through ``--profile profiles/derecho``, nothing overridden (a
    ``main`` queue exists here), on a node advertising Derecho's size: every job asks for
    a whole node (``ncpus=128``, ``mem=235gb``) in ``main``, the two shards run as one
    group job, all end with Exit_status 0; the movie and COPY file exact."""
    work = workdir(tmp_path_factory, sample_nc, "pbs_derecho")
    log = snakemake(work, "--profile", "profiles/derecho", "--config", *SMALL,
                    "frames_per_shard=120", PBS_ACCOUNT=ACCOUNT)
    jobs = wait_finished(*submitted(log))
    names = sorted(re.sub(r"_[0-9a-f-]{36}$|_\d+$", "", j["Job_Name"]) for j in jobs.values())
    assert names == sorted(["nc_statistics", "nc_calibrate_render", "nc_group_shards",
                            "nc_reduce_cells", "nc_concat_segments", "nc_preview"]), names
    for pbs_id, rec in jobs.items():
        assert rec["Exit_status"] == 0, (pbs_id, rec.get("comment"))
        assert rec["queue"] == "main" and rec["Account_Name"] == ACCOUNT, pbs_id
        assert rec["Resource_List"]["ncpus"] == 128, pbs_id
        assert rec["Resource_List"]["mem"] == "235gb", pbs_id
        assert rec["Resource_List"]["select"].startswith("1:ncpus=128:mem=235GB"), pbs_id
    assert count_rows(work / "results/demo/cells.copy") == ROWS
    assert frame_count(work / "results/demo/movie.mp4") == FRAMES


# ------------------------------------------------------------------ how jobs end, for real
#: name -> (qsub options, job body, verdict of the status command). Submitted directly with
#: PBS's qsub (no -V, so the recorded documents hold no environment beyond PBS_O_*).
ENDINGS = {
    "finished_ok": ([], "exit 0", "success"),
    "finished_failed": ([], "exit 3", "failed"),
    # 600 MB touched against mem=100MB: MoM's `$enforce mem` kills it (Exit_status -27).
    "memory_killed": ([], "python3 -c 'import time; a = bytearray(600 << 20); time.sleep(120)'",
                      "failed"),
    "walltime_killed": (["-l", "walltime=00:00:05"], "sleep 120", "failed"),
    # `qsig -s KILL` once running, as a node's OOM killer would: 256 + SIGKILL.
    "killed_sigkill_265": ([], "exec sleep 300", "failed"),
    # qdel once running: 256 + SIGTERM, or 128 + SIGTERM when the job's shell outlives
    # the killed process and reports it (both seen on this server).
    "deleted_running_271": ([], "exec sleep 300", "failed"),
    "deleted_before_run": (["-h"], "sleep 1", "failed"),  # held, then qdel
    "held": (["-h"], "sleep 1", "running"),
    # More than the node has: PBS keeps it queued ("Can Never Run").
    "queued": (["-l", "select=1:ncpus=64:mem=100MB"], "sleep 1", "running"),
}


def pbs_status(jobid: str) -> str:
    """What the profiles' status command (cluster-generic-status-cmd) prints for `jobid`."""
    proc = subprocess.run([sys.executable, str(ROOT / "workflow/scripts/ncreel_pbs.py"),
                           "status", jobid], capture_output=True, text=True, env=pbs_env(),
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip()


def test_status_command_on_real_job_endings(pbs, tmp_path, request):
    """Each way a PBS job ends, for real: the status command's verdict, the Exit_status
    PBS records and why. With NCREEL_RECORD_QSTAT=<dir> the ``qstat -x -f -F json``
    documents are written there (tests/data/qstat_pbspro/ was recorded this way)."""
    ids = {}
    # Held and queued jobs would otherwise stay on the server after a failure here.
    request.addfinalizer(lambda: subprocess.run([QDEL, *ids.values()], capture_output=True))
    for name, (opts, body, _) in ENDINGS.items():
        script = tmp_path / f"{name}.sh"
        script.write_text(f"#!/bin/bash\n{body}\n")
        ids[name] = subprocess.run(
            [QSUB, "-N", f"nc_{name}"[:15], "-A", ACCOUNT, "-j", "oe", "-o", str(tmp_path),
             "-l", "select=1:ncpus=1:mem=100MB", "-l", "walltime=00:02:00", *opts,
             str(script)], capture_output=True, text=True, check=True, cwd=tmp_path,
            env=pbs_env()).stdout.strip()
    docs = {}
    deadline = time.time() + 240
    for name in ("deleted_running_271", "killed_sigkill_265"):
        while (rec := qstat_jobs(ids[name])[ids[name]])["job_state"] != "R":
            assert time.time() < deadline, rec
            time.sleep(0.5)
    docs["running"] = qstat_doc(ids["deleted_running_271"])
    subprocess.run([str(PBS_BIN / "qsig"), "-s", "KILL", ids["killed_sigkill_265"]], check=True)
    while "Can Never Run" not in qstat_jobs(ids["queued"])[ids["queued"]].get("comment", ""):
        assert time.time() < deadline
        time.sleep(0.5)
    for name in ("queued", "held"):
        docs[name] = qstat_doc(ids[name])
        assert pbs_status(ids[name]) == "running"
    subprocess.run([QDEL, ids["deleted_running_271"], ids["deleted_before_run"],
                    ids["queued"], ids["held"]], check=True)
    del ids["queued"], ids["held"]
    final = wait_finished(*ids.values(), timeout=240)
    verdicts = {name: pbs_status(jobid) for name, jobid in ids.items()}
    assert verdicts == {name: ENDINGS[name][2] for name in ids}
    codes = {name: final[jobid].get("Exit_status") for name, jobid in ids.items()}
    # A signal that ends the job's top shell is 256 + signal; one that ends the command it
    # runs while the shell lives on is the shell's 128 + signal. Which process the signal
    # reaches first varies from run to run here, so both are right (and both are failed).
    assert codes.pop("deleted_running_271") in QDEL_OF_A_RUNNING_JOB
    assert codes.pop("killed_sigkill_265") in (265, 137)
    assert codes == {"finished_ok": 0, "finished_failed": 3, "memory_killed": -27,
                     "walltime_killed": -29, "deleted_before_run": None}
    assert final[ids["memory_killed"]]["comment"].endswith("exceeded resource mem")
    assert final[ids["memory_killed"]]["Resource_List"]["mem"] == "100mb"
    assert final[ids["walltime_killed"]]["comment"].endswith("exceeded resource walltime")
    unknown = subprocess.run([QSTAT, "-x", "-f", "-F", "json", f"99999999.{pbs}"],
                             capture_output=True, text=True)
    assert unknown.returncode == 153 and "Unknown Job Id" in unknown.stderr
    docs["no_jobs"] = json.loads(unknown.stdout)
    assert pbs_status(f"99999999.{pbs}") == "failed"
    record = os.environ.get("NCREEL_RECORD_QSTAT")
    if record:
        docs.update({name: qstat_doc(jobid) for name, jobid in ids.items()})
        for name, doc in docs.items():
            Path(record, f"{name}.json").write_text(json.dumps(doc, indent=1) + "\n")


def test_exiting_state_for_real(pbs, tmp_path):
    """A job held in state E (exiting) for real: its stage-out copies into a FIFO that
    nobody reads until the test has seen E, so MoM's ``cp`` blocks while the server waits
    for it. The status command says ``running`` then, ``success`` once it is F. With
    NCREEL_RECORD_QSTAT=<dir> the E document is written there as ``exiting.json``."""
    src, fifo = tmp_path / "staged.txt", tmp_path / "stageout.fifo"
    src.write_text("staged\n")
    os.mkfifo(fifo)
    script = tmp_path / "exiting.sh"
    script.write_text("#!/bin/bash\nexit 0\n")
    jobid = subprocess.run(
        [QSUB, "-N", "nc_exiting", "-A", ACCOUNT, "-j", "oe", "-o", str(tmp_path),
         "-l", "select=1:ncpus=1:mem=100MB", "-l", "walltime=00:02:00",
         "-W", f"stageout={src}@{pbs}:{fifo}", str(script)],
        capture_output=True, text=True, check=True, cwd=tmp_path, env=pbs_env()).stdout.strip()
    reader = None
    try:
        deadline = time.time() + 240
        while (rec := qstat_jobs(jobid)[jobid])["job_state"] != "E":
            assert rec["job_state"] in "QR" and time.time() < deadline, rec
            time.sleep(0.2)
        doc = qstat_doc(jobid)
        assert pbs_status(jobid) == "running"
        assert qstat_jobs(jobid)[jobid]["job_state"] == "E"  # still, while asked
    finally:
        # Let the stage-out finish whatever happened (else the job stays E for ever).
        reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    try:
        final = wait_finished(jobid, timeout=120)[jobid]
        assert os.read(reader, 100) == b"staged\n"
    finally:
        os.close(reader)
    assert final["Exit_status"] == 0 and pbs_status(jobid) == "success"
    assert doc["Jobs"][jobid]["job_state"] == "E"
    record = os.environ.get("NCREEL_RECORD_QSTAT")
    if record:
        Path(record, "exiting.json").write_text(json.dumps(doc, indent=1) + "\n")


def test_memory_killed_shard_is_retried_with_more_memory(cheyenne_demo):
    """Through ``--profile profiles/cheyenne``: shard 00001 (removed after the demo run)
    declares mem_mb = 100 x attempt², too little the first time, and the executor adds no
    overhead for the job's own Snakemake (``--pbs-pro-job-overhead-mb 0``): that process
    alone is above it for the job's whole life, so MoM's periodic check (every 2-10 s)
    always sees it. PBS kills it (Exit_status -27, "exceeded resource mem"), the
    status command says failed, Snakemake resubmits it with more memory until it succeeds
    (400, then 900 MB), with the same rows as before."""
    work, _ = cheyenne_demo
    shard_copy = work / "results/demo/cells/00001.copy"
    rows = count_rows(shard_copy)
    shard_copy.unlink()
    log = snakemake(work, "--profile", "profiles/cheyenne", "--config", *SMALL,
                    "frames_per_shard=120", "--set-resources",
                    "process_shard:mem_mb=100*attempt*attempt",
                    "--pbs-pro-job-overhead-mb", "0",
                    "--", str(shard_copy.relative_to(work)), PBS_ACCOUNT=ACCOUNT)
    ids = sorted(submitted(log), key=lambda jobid: int(jobid.split(".")[0]))
    jobs = wait_finished(*ids)
    shard = [jobs[i] for i in ids]
    assert [r["Job_Name"] for r in shard] == ["nc_process_shard_00001"] * len(shard)
    got = [(r["Exit_status"], r["Resource_List"]["mem"]) for r in shard]
    # The first attempt is always killed; the second's 400 MB may or may not hold.
    assert got in ([(-27, "100mb"), (0, "400mb")],
                   [(-27, "100mb"), (-27, "400mb"), (0, "900mb")]), \
        [r.get("comment") for r in shard]
    assert shard[0]["comment"].endswith("exceeded resource mem")
    assert "JOB_EXEC_KILL_MEM" in log
    assert count_rows(shard_copy) == rows


def _stamp(text: str) -> float:
    return time.mktime(time.strptime(text, "%a %b %d %H:%M:%S %Y"))


def test_kill_snakemake_and_resume_on_pbs(pbs, tmp_path_factory, sample_nc):
    """SIGKILL the snakemake process while shards are queued/running in PBS, run the same
    command again: the killed run's jobs are deleted before anything new is submitted (no
    shard runs twice at once), finished shards are kept, the COPY file has exactly the
    expected rows, and no job of either run is left in qstat."""
    work = workdir(tmp_path_factory, sample_nc, "pbs_resume")
    args = ["--profile", "profiles/cheyenne", "--config", *SMALL, "frames_per_shard=60", "--",
            "results/demo/cells.copy"]
    cells = work / "results/demo/cells"
    first_log = work / "first.out"

    def finished():  # shards Snakemake has seen succeed (no longer marked incomplete)
        marked = _incomplete(work)
        return [p for p in cells.glob("*.copy") if f"results/demo/cells/{p.name}" not in marked]

    with open(first_log, "w") as out, subprocess.Popen(
            [sys.executable, "-m", "snakemake", *FAST, *args], cwd=work, stdout=out,
            stderr=subprocess.STDOUT, env=pbs_env(PBS_ACCOUNT=ACCOUNT),
            start_new_session=True) as proc:
        deadline = time.time() + 600
        while time.time() < deadline and len(finished()) < 1:
            assert proc.poll() is None, "snakemake ended before it could be killed"
            time.sleep(0.5)
        proc.send_signal(signal.SIGKILL)  # snakemake only: its PBS jobs keep going
    old = list(submitted(first_log.read_text()))
    active = [j for j, rec in qstat_jobs(*old).items() if rec["job_state"] != "F"]
    assert active, "some shards should still be queued or running in PBS"
    incomplete = _incomplete(work)
    done = {p: hashlib.sha256(p.read_bytes()).hexdigest() for p in cells.glob("*.copy")
            if f"results/demo/cells/{p.name}" not in incomplete}
    assert 1 <= len(done) < 4
    log = snakemake(work, *args, PBS_ACCOUNT=ACCOUNT)  # the same command again
    assert "removed the stale lock" in log
    assert count_rows(work / "results/demo/cells.copy") == ROWS
    for p in done:  # finished shards were not redone
        assert f"wildcards: shard={p.stem}" not in log, f"shard {p.stem} was redone"
    assert {p: hashlib.sha256(p.read_bytes()).hexdigest() for p in done} == done
    assert len(list(cells.glob("*.copy"))) == 4
    assert not list(work.glob("results/demo/**/*.part"))
    # Every job of both runs has ended; jobs of one shard never overlapped in time.
    jobs = wait_finished(*old, *submitted(log), timeout=60)
    # Sub-jobs of an array share its Job_Name: name them by the shard they ran.
    shard_of = {}
    for array, manifest in re.findall(r"as PBS job array (\S+) \(manifest (\S+)\)",
                                      first_log.read_text() + log):
        for e in json.loads(Path(manifest).read_text())["jobs"]:
            shard_of[array.replace("[]", f"[{e['index']}]")] = \
                f"nc_process_shard_{e['wildcards']['shard']}"
    spans: dict[str, list] = {}
    for jobid, rec in jobs.items():
        if "stime" in rec:
            spans.setdefault(shard_of.get(jobid, rec["Job_Name"]), []).append(
                (_stamp(rec["stime"]), _stamp(rec["obittime"])))
    for name, runs in spans.items():
        runs.sort()
        for (_, end), (start, _) in zip(runs, runs[1:], strict=False):
            assert start >= end, f"{name} ran twice at once: {runs}"
    for jobid in active:  # deleted itself, or with its whole array (123[].server)
        deleted = [f"ncreel: deleted PBS job {j} of the killed run"
                   for j in (jobid, re.sub(r"\[\d+\]", "[]", jobid))]
        assert any(d in log for d in deleted) or jobs[jobid].get("Exit_status") == 0, \
            (jobid, jobs[jobid])


# ------------------------------------------------------------- peer servers, accounts, errors
def _jobscript(path: Path, body: str, rule: str) -> Path:
    """A jobscript as Snakemake writes it (the submit command reads its properties line)."""
    props = {"type": "single", "rule": rule, "wildcards": {}, "threads": 1,
             "resources": {"mem_mb": 100, "runtime": 2}, "jobid": 1}
    path.write_text(f"#!/bin/sh\n# properties = {json.dumps(props)}\n{body}\n")
    return path


#: The cluster-generic commands ncreel still ships (workflow/scripts/ncreel_pbs.py) for
#: sites that prefer that executor; the profiles use the pbs-pro executor, whose qsub
#: line and state rules are the same functions (ncreel.cluster.pbs).
GENERIC = {
    "submit": [sys.executable, "workflow/scripts/ncreel_pbs.py", "submit", "--queue", "share",
               "--max-walltime", "06:00:00"],
    "status": [sys.executable, "workflow/scripts/ncreel_pbs.py", "status"],
    "cancel": ["qdel"],
}


def test_queue_at_server_and_suffixed_job_ids(pbs, tmp_path):
    """ncreel's cluster-generic submit/status/cancel commands with a ``queue@server``
    destination (how a job goes to a peer server, as Casper's and Derecho's are): the job
    id carries the server's suffix, status answers for it (and for the bare number), and
    the cancel command (qdel) of a running job makes it ``failed``."""
    env = pbs_env(PBS_ACCOUNT=ACCOUNT, SNAKEMAKE_PBS_PRO_QUEUE=f"share@{pbs}")
    (tmp_path / "workflow").symlink_to(ROOT / "workflow")

    def run(*cmd):
        proc = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True,
                              timeout=120)
        assert proc.returncode == 0, proc.stderr
        return proc.stdout.strip()

    submit, status = GENERIC["submit"], GENERIC["status"]
    ok = run(*submit, str(_jobscript(tmp_path / "snakejob.ok.sh", "exit 0", "ok")))
    long = run(*submit, str(_jobscript(tmp_path / "snakejob.long.sh", "sleep 300", "long")))
    assert ok.endswith(f".{pbs}") and long.endswith(f".{pbs}")
    deadline = time.time() + 240
    while qstat_jobs(long)[long]["job_state"] != "R":
        assert time.time() < deadline
        time.sleep(0.5)
    run(*GENERIC["cancel"], long)
    jobs = wait_finished(ok, long)
    assert {j["queue"] for j in jobs.values()} == {"share"}
    assert {j["Account_Name"] for j in jobs.values()} == {ACCOUNT}
    assert run(*status, ok) == "success" and run(*status, ok.split(".")[0]) == "success"
    assert run(*status, long) == "failed" and jobs[long]["Exit_status"] in QDEL_OF_A_RUNNING_JOB


PEER = "pbs2"  # the second PBS server of .ci/pbs-peer-up.sh


@pytest.fixture(scope="session")
def peer_server(pbs) -> str:
    """A second, real PBS Pro server on this host (no MoM: its jobs stay queued)."""
    def up():
        return subprocess.run([QSTAT, "-B", PEER], capture_output=True).returncode == 0
    if not up() and os.geteuid() == 0:
        subprocess.run(["bash", str(ROOT / ".ci/pbs-peer-up.sh")], check=False)
    if not up():
        pytest.fail(f"the peer PBS server {PEER} is not running: run "
                    "`sudo bash .ci/pbs-peer-up.sh` (see docs/development.md)")
    return PEER


def test_peer_server_submit_status_delete(pbs, peer_server, tmp_path, monkeypatch):
    """Two real PBS servers, as NCAR's Casper and Derecho are: the executor's qsub line
    sends a job to ``share@pbs2`` and gets ``N.pbs2``; ONE ``qstat`` call answers for it
    and for a job of the default server; ``qdel`` from the default server's clients
    deletes it there; the deleted job is ``failed``. A killed run's job on the peer server
    is found and deleted by the orphan clean-up (which asked only the default server)."""
    from ncreel.cluster import pbs as ncpbs
    from ncreel.cluster.pbs import cancel_orphan_pbs_jobs
    from snakemake_executor_plugin_pbs_pro import job_status_query

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PATH", pbs_env()["PATH"])
    (tmp_path / ".snakemake").mkdir()
    script = _jobscript(tmp_path / ".snakemake" / "snakejob.peer.sh", "exit 0", "peer")
    props = ncpbs.read_properties(script)
    kw = dict(account=ACCOUNT, log_dir=str(tmp_path / "logs"))
    (tmp_path / "logs").mkdir()
    peer_job = ncpbs.run_qsub(ncpbs.build_qsub(props, str(script), queue=f"share@{peer_server}",
                                               **kw))
    held = ncpbs.build_qsub(props, str(script), queue="share", **kw)
    home_job = ncpbs.run_qsub([held[0], "-h", *held[1:]])  # held: stays in the default server
    assert peer_job.endswith(f".{peer_server}") and home_job.endswith(f".{pbs}")
    calls = []

    def counting(cmd, timeout=60):
        calls.append(cmd)
        return job_status_query._run(cmd, timeout=timeout)

    got = job_status_query.statuses([peer_job, home_job], runner=counting, state_dir=tmp_path)
    assert got == {peer_job: "running", home_job: "running"} and len(calls) == 1
    rec = qstat_jobs(peer_job)[peer_job]
    assert rec["queue"] == "share" and rec["Account_Name"] == ACCOUNT
    assert rec["Resource_List"]["mem"] == "100mb" and rec["server"] == peer_server
    subprocess.run([QDEL, peer_job], check=True)
    assert wait_finished(peer_job)[peer_job]["job_state"] == "F"
    assert job_status_query.statuses([peer_job], state_dir=tmp_path) == {peer_job: "failed"}

    # A killed run's jobs, one per server, recorded in the executor's journal.
    orphan = ncpbs.run_qsub(ncpbs.build_qsub(props, str(script), queue=f"share@{peer_server}",
                                             **kw))
    journal = tmp_path / ".snakemake" / "pbs-pro" / "journal.jsonl"
    journal.parent.mkdir(parents=True)
    journal.write_text("".join(json.dumps({"submit": j, "outputs": []}) + "\n"
                               for j in (orphan, home_job)))
    deleted = cancel_orphan_pbs_jobs(str(tmp_path), timeout=60, poll=1)
    assert sorted(deleted) == sorted([orphan, home_job])
    assert {j["job_state"] for j in wait_finished(orphan, home_job).values()} == {"F"}


def test_missing_account_and_unknown_queue_stop_before_any_job(pbs, tmp_path_factory,
                                                               sample_nc):
    """No PBS_ACCOUNT, or a queue the server does not have: one ``ncreel: error:`` line
    naming what to set, before anything is submitted."""
    work = workdir(tmp_path_factory, sample_nc, "pbs_errors")
    target = ["--profile", "profiles/cheyenne", "--config", *SMALL, "--",
              "results/demo/stats.json"]
    log = snakemake(work, *target, check=False)
    assert "ncreel: error: PBS_ACCOUNT is unset: export PBS_ACCOUNT=<project code>" in log
    log2 = snakemake(work, *target, check=False, PBS_ACCOUNT=ACCOUNT,
                     SNAKEMAKE_PBS_PRO_QUEUE="nosuch")
    errors = [ln for ln in log2.splitlines() if ln.startswith("ncreel: error:")]
    assert errors == [errors[0]] and "PBS queue 'nosuch' does not exist" in errors[0]
    assert "share" in errors[0]  # lists the queues there are
    assert not submitted(log + log2) and not (work / "results/demo/stats.json").exists()


def test_rejected_resource_request_is_one_line(pbs, tmp_path_factory, sample_nc):
    """A job asking more memory than the queue allows (share: resources_max.mem 100gb):
    PBS's qsub rejects it and the run fails naming the reason in one line."""
    work = workdir(tmp_path_factory, sample_nc, "pbs_rejected")
    log = snakemake(work, "--profile", "profiles/cheyenne", "--config", *SMALL,
                    "--set-resources", "statistics:mem_mb=200000", "--",
                    "results/demo/stats.json", check=False, PBS_ACCOUNT=ACCOUNT)
    lines = [ln for ln in log.splitlines() if "pbs-pro: error:" in ln]
    assert lines, log[-3000:]
    for line in lines:  # 200000 MB plus the executor's overhead, as it told the job
        extra = int(re.search(r"SNAKEMAKE_PBS_PRO_JOB_OVERHEAD_MB=(\d+)", line).group(1))
        assert f"mem={request_mem_mb(200000, extra)}MB" in line, line
    assert "qsub: Job violates queue and/or server resource limits" in lines[0]
    assert not submitted(log)


def test_a_qstat_that_is_not_pbs_pros_stops_before_any_job(pbs, tmp_path_factory, sample_nc):
    """PBS Pro's qsub but Slurm's Torque-wrapper qstat first on PATH (it rejects ``-x``,
    so finished jobs would never be seen): one ``pbs-pro: error:`` line naming that
    qstat and the fix, before anything is submitted; no waiting for ever."""
    work = workdir(tmp_path_factory, sample_nc, "pbs_torque_qstat")
    bindir = work / "mixed-bin"
    bindir.mkdir()
    for name, target in (("qsub", QSUB), ("qdel", QDEL), ("qstat", "/usr/bin/qstat")):
        (bindir / name).symlink_to(target)
    e = pbs_env(PBS_ACCOUNT=ACCOUNT)
    e["PATH"] = f"{bindir}:{e['PATH']}"
    t = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "snakemake", *FAST, "--profile",
                           "profiles/casper", "--config", *SMALL, "--",
                           "results/demo/stats.json"], cwd=work, capture_output=True,
                          text=True, env=e, timeout=300)
    log = proc.stdout + proc.stderr
    assert proc.returncode != 0 and time.monotonic() - t < 120, log[-3000:]
    errors = {ln for ln in log.splitlines() if ln.startswith("pbs-pro: error:")}
    assert len(errors) == 1, log[-3000:]
    (line,) = errors
    assert f"{bindir}/qstat is not PBS Pro's qstat" in line and "Unknown option" in line
    assert "export PATH=/opt/pbs/bin:$PATH" in line
    assert not submitted(log) and not list(work.glob("logs/pbs/*.qsub"))


def test_shell_metacharacters_reach_pbs_jobs_unchanged(pbs, tmp_path_factory):
    """Every shell metacharacter and `{x}` in the table, the variable, the input path and
    ``--pbs-pro-log-dir`` (and in a variable passed with ``--envvars``), given with
    ``--config``: PBS runs each job's script with /bin/sh,
    yet nothing is executed and the jobs used exactly the checked names
    (tests/odd_text.py). A queue of such text is refused before any job, running nothing."""
    from odd_text import check_odd_run, config_args, payload, write_odd_input

    work = make_workdir(tmp_path_factory.mktemp("pbs_odd"))
    values = write_odd_input(work)
    logdir = "logs/" + payload("l")
    log = snakemake(work, "--profile", "profiles/casper", "--pbs-pro-log-dir", logdir,
                    "--envvars", "NCREEL_ODD", "--config", *SMALL, "frames_per_shard=4",
                    *config_args(values), "--", "results/demo/cells.sql",
                    PBS_ACCOUNT=ACCOUNT, NCREEL_ODD=payload("e"))
    check_odd_run(work, values)
    assert len(submitted(log)) == 4 and len(list((work / logdir).glob("*.log"))) == 4
    log = snakemake(work, "--profile", "profiles/casper", "--pbs-pro-queue", payload("q"),
                    "--config", *SMALL, "frames_per_shard=4", *config_args(values),
                    "run=q", "--", "results/q/stats.json", check=False,
                    PBS_ACCOUNT=ACCOUNT)
    errors = [ln for ln in log.splitlines() if ln.startswith("ncreel: error:")]
    assert len(errors) == 1 and "is not a valid destination" in errors[0], log[-3000:]
    assert not submitted(log)
    assert not list(work.parent.rglob("PWNED*"))


def test_unanswering_server_and_log_dir_outside_stop_before_any_job(pbs, tmp_path_factory,
                                                                    sample_nc):
    """A ``queue@server`` whose server does not answer, and a relative
    ``--pbs-pro-log-dir`` leading out of the working directory: one error line each,
    nothing submitted, nothing written outside."""
    work = workdir(tmp_path_factory, sample_nc, "pbs_refusals")
    target = ["--config", *SMALL, "--", "results/demo/stats.json"]
    log = snakemake(work, "--profile", "profiles/casper", "--pbs-pro-queue",
                    "casper@nosuchhost.invalid", *target, check=False, PBS_ACCOUNT=ACCOUNT)
    errors = [ln for ln in log.splitlines() if ln.startswith("ncreel: error:")]
    assert len(errors) == 1 and "PBS server 'nosuchhost.invalid' of queue" in errors[0]
    assert "does not answer" in errors[0] and not submitted(log)
    log = snakemake(work, "--profile", "profiles/casper", "--pbs-pro-log-dir", "../..",
                    *target, check=False, PBS_ACCOUNT=ACCOUNT)
    errors = [ln for ln in log.splitlines() if ln.startswith("pbs-pro: error:")]
    assert len(errors) == 1 and "leads out of the working directory" in errors[0], log[-2000:]
    assert not submitted(log) and not list(work.parent.parent.glob("nc_*.qsub"))


def _job_ancestors(pid: int) -> list[int]:
    """The processes above `pid` in its PBS job's session (the job's own Snakemake and
    the shells between), nearest first."""
    def stat(p):  # (ppid, session id) from /proc/<p>/stat; the name may hold spaces
        fields = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
        return int(fields[1]), int(fields[3])

    ppid, sid = stat(pid)
    out = []
    while ppid > 1 and stat(ppid)[1] == sid:
        out.append(ppid)
        ppid = stat(ppid)[0]
    return out


@contextlib.contextmanager
def shard_started(work: Path, record: Path, out: Path, *extra: str, **envs):
    """Run the demo's table through ``--profile profiles/cheyenne`` (2 shards, output to
    `out`) until the shard whose attempts file is `record` has started its script.

    Yields the ``snakemake`` process (its own session) and the shard's start record.
    """
    with open(out, "w") as fh, subprocess.Popen(
            [sys.executable, "-m", "snakemake", *FAST, "--profile", "profiles/cheyenne",
             *extra, "--config", *SMALL, "frames_per_shard=120", "--",
             "results/demo/cells.copy"],
            cwd=work, stdout=fh, stderr=subprocess.STDOUT,
            env=pbs_env(PBS_ACCOUNT=ACCOUNT, **envs), start_new_session=True) as proc:
        deadline = time.time() + 300
        while not (record.exists() and record.read_text().strip()):
            assert proc.poll() is None and time.time() < deadline, out.read_text()[-3000:]
            time.sleep(0.05)
        yield proc, json.loads(record.read_text().splitlines()[0])


def test_a_job_deleted_after_its_script_ended_is_recorded_as_attempt_2(pbs, tmp_path_factory,
                                                                       sample_nc):
    """``qdel`` of a shard sub-job after its script wrote its ``ok`` end line, while the
    job's own Snakemake has not finished (held with SIGSTOP, so the window is sure), with
    ``--pbs-pro-retry-deleted`` (a deleted job is retried as any failure): PBS reports
    it failed and Snakemake retries it as attempt 2. The attempts record says
    attempt 1 ``failed`` (``after_script``) then attempt 2 ``ok`` -- it used to say
    ``attempt 1`` twice -- and ``ncreel status`` counts 2 attempts."""
    from ncreel.cluster.runstatus import shard_status
    from ncreel.run.jobrecord import read_attempts

    work = workdir(tmp_path_factory, sample_nc, "pbs_attempts")
    record = work / "logs/demo/process_shard/00000.log.attempts.jsonl"
    out = work / "snakemake.out"
    with shard_started(work, record, out, "--pbs-pro-retry-deleted") as (proc, start):
        deadline = time.time() + 300
        held = _job_ancestors(start["pid"])
        for p in held:
            os.kill(p, signal.SIGSTOP)
        try:
            while '"end"' not in record.read_text():
                assert time.time() < deadline
                time.sleep(0.05)
            subprocess.run([QDEL, start["jobid"]], check=True, env=pbs_env(), timeout=60)
            # Resume only once PBS is ending the job (its SIGTERM pending, else its
            # SIGKILL after kill_delay): resumed earlier, the job could still finish.
            while qstat_doc(start["jobid"]).get("Jobs", {}).get(
                    start["jobid"], {}).get("job_state") not in ("E", "F"):
                assert time.time() < deadline
                time.sleep(0.2)
        finally:
            for p in held:  # killed by PBS by now, or resumed to take its SIGTERM
                with contextlib.suppress(ProcessLookupError):
                    os.kill(p, signal.SIGCONT)
        assert proc.wait(timeout=400) == 0, out.read_text()[-3000:]
    log = out.read_text()
    assert f"job {start['jobid']} failed" in log
    got = [(a["attempt"], a["status"], a.get("reason"), a["jobid"])
           for a in read_attempts(record)]
    assert [g[:3] for g in got] == [(1, "failed", "after_script"), (2, "ok", None)], got
    assert got[0][3] == start["jobid"] and got[1][3] != start["jobid"]
    assert count_rows(work / "results/demo/cells.copy") == ROWS
    rows = {r["shard"]: r for r in shard_status(work, "demo")}
    assert (rows["00000"]["state"], rows["00000"]["attempts"]) == ("done", 2)


def test_a_shard_deleted_with_qdel_is_not_resubmitted(pbs, tmp_path_factory, sample_nc):
    """``qdel`` of a running shard sub-job (as its owner would) through ``--profile
    profiles/cheyenne`` (``retries: 2``): the executor says in one line that the job was
    deleted with qdel and by whom (not "failed"), refuses Snakemake's next attempt in one
    line without ``qsub``, and the run ends non-zero. The shard was submitted exactly once;
    PBS ended it in substate 91 (terminated); its attempts record holds attempt 1 only.

    The job's ``Variable_List``, which ``qstat -f`` shows to every user
    (``query_other_jobs``), holds what the job needs (PATH, the run's virtualenv) and none
    of the secrets in the user's shell -- an API token, AWS keys, ``PGPASSWORD`` (``qsub
    -V`` put them all there) -- read as user ``nobody``; ``PGPASSWORD`` is in no file of
    the run."""
    from ncreel.run.jobrecord import read_attempts

    work = workdir(tmp_path_factory, sample_nc, "pbs_qdel")
    record = work / "logs/demo/process_shard/00000.log.attempts.jsonl"
    out = work / "snakemake.out"
    password = "pw-only-for-this-test"
    secrets = {"PGPASSWORD": password, "MY_API_TOKEN": "tok-only-for-this-test",
               "AWS_ACCESS_KEY_ID": "AKIAONLYFORTHISTEST", "GITHUB_TOKEN": "ghp_onlyforthis",
               "AWS_SECRET_ACCESS_KEY": "aws-secret-only-for-this-test"}
    with shard_started(work, record, out, **secrets) as (proc, start):
        jobid = start["jobid"]
        shown = subprocess.run(["runuser", "-u", "nobody", "--", QSTAT, "-f", jobid],
                               capture_output=True, text=True, timeout=60).stdout
        shown = shown.replace("\n\t", "")  # qstat folds long lines
        variables = re.search(r"Variable_List = (.*)", shown).group(1)
        path = re.search(r"(?:^|,)PATH=([^,]*)", variables).group(1)
        assert str(Path(sys.executable).parent) in path.split(":"), variables
        for name, value in secrets.items():
            assert name not in shown and value not in shown, name
        subprocess.run([QDEL, jobid], check=True, env=pbs_env(), timeout=60)
        assert proc.wait(timeout=400) != 0, out.read_text()[-3000:]
    log = out.read_text()
    sm_id = submitted(log)[jobid]
    deleted = re.findall(rf"^pbs-pro: PBS job {re.escape(jobid)} \(rule process_shard, "
                         rf"job {sm_id}\) was deleted with qdel by (\S+); it is not "
                         r"resubmitted\.$", log, re.M)
    assert deleted and deleted[0].startswith("root@"), log[-3000:]
    refused = [ln for ln in log.splitlines() if ln.startswith("pbs-pro: error: not resubmitting")]
    assert refused == [f"pbs-pro: error: not resubmitting rule process_shard, job {sm_id}: its "
                       f"PBS job {jobid} was deleted with qdel by {deleted[0]}. Run the same "
                       "command again to submit it anew (pbs-pro-retry-deleted: true "
                       "resubmits deleted jobs)."], log[-3000:]
    assert list(submitted(log).values()).count(sm_id) == 1, log[-3000:]
    assert f"job {jobid} failed" not in log
    rec = wait_finished(jobid)[jobid]
    assert rec["substate"] == 91, rec.get("comment")  # JOB_SUBSTATE_TERMINATED
    assert [a["attempt"] for a in read_attempts(record)] == [1]
    assert not (work / "results/demo/cells.copy").exists()
    assert password not in log
    written = [p for p in work.rglob("*") if p.is_file() and not p.is_symlink()
               and p.stat().st_size < 2**20 and password.encode() in p.read_bytes()]
    assert not written, written


WALLTIME_SNAKEFILE = """
rule all:
    input: "a.txt"

# Attempt 1 asks for 1 minute and sleeps longer: PBS kills it for walltime (-29);
# attempt 2 asks for 2 minutes and ends at once.
rule a:
    output: "a.txt"
    resources: runtime=lambda wildcards, attempt: attempt, mem_mb=20
    shell: "[ {resources.runtime} -gt 1 ] || sleep 150; echo {resources.runtime} > {output}"
"""


def test_a_walltime_kill_is_resubmitted_with_a_longer_walltime(pbs, tmp_path):
    """Unlike a deleted job, a job PBS killed for walltime (Exit_status -29, substate 93)
    is resubmitted (Snakemake's ``retries``), its walltime growing with the attempt."""
    (tmp_path / "Snakefile").write_text(WALLTIME_SNAKEFILE)
    proc = subprocess.run(
        [sys.executable, "-m", "snakemake", *FAST, "--executor", "pbs-pro",
         "--pbs-pro-queue", "workq", "--pbs-pro-no-account", "-j", "1", "--retries", "1"],
        cwd=tmp_path, env=pbs_env(), capture_output=True, text=True, timeout=600)
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0, log[-4000:]
    ids = list(submitted(log))
    assert len(ids) == 2, log[-3000:]
    jobs = wait_finished(*ids)
    got = [(jobs[i]["Exit_status"], jobs[i]["substate"], jobs[i]["Resource_List"]["walltime"])
           for i in ids]
    assert got == [(-29, 93, "00:01:00"), (0, 92, "00:02:00")], got
    assert "JOB_EXEC_KILL_WALLTIME" in log and "deleted with qdel" not in log
    assert (tmp_path / "a.txt").read_text() == "2\n"


def test_resume_beside_a_live_run_deletes_only_the_killed_runs_jobs(pbs, tmp_path_factory,
                                                                      sample_nc):
    """PBS twin of test_slurm's: run ``demo`` was killed with a job held in PBS; run
    ``other`` is live in the same directory (its Snakemake on another host, seen here by
    its run lock only) with its own job. The same command as ``demo``'s (a dry run reads
    the workflow the same way) deletes ``demo``'s job only; before, both were deleted."""
    from ncreel.cluster import pbs as ncpbs
    from test_cluster_runlock import hold_elsewhere
    from test_slurm import leave_killed_run_beside_live_one

    work = workdir(tmp_path_factory, sample_nc, "pbs_beside")
    (work / ".snakemake").mkdir()
    (work / "logs").mkdir()
    ids = {}
    for run in ("demo", "other"):
        script = _jobscript(work / ".snakemake" / f"snakejob.{run}.sh", "sleep 300", run)
        cmd = ncpbs.build_qsub(ncpbs.read_properties(script), str(script), queue="share",
                               account=ACCOUNT, log_dir=str(work / "logs"))
        ids[run] = subprocess.run([cmd[0], "-h", *cmd[1:]], cwd=work, env=pbs_env(),
                                  capture_output=True, text=True, check=True).stdout.strip()
    try:
        locks = leave_killed_run_beside_live_one(work, ids["demo"])
        with hold_elsewhere(work / "results/other/.ncreel-run.lock") as other:
            try:
                out = snakemake(work, "-n", "--profile", "profiles/cheyenne",
                                PBS_ACCOUNT=ACCOUNT)
            finally:
                other.kill()
        assert f"ncreel: deleted PBS job {ids['demo']} of the killed run" in out, out[-3000:]
        assert f"PBS job {ids['other']}" not in out
        left = qstat_jobs(*ids.values())
        assert left[ids["other"]]["job_state"] == "H", left
        assert left[ids["demo"]]["job_state"] == "F", left
        assert sorted(p.name for p in locks.iterdir()) == ["1.output.lock"]
    finally:
        subprocess.run([QDEL, *ids.values()], check=False, capture_output=True)


def test_resubmitted_controller_on_another_node_resumes_once_the_old_one_ended(
        pbs, tmp_path_factory, sample_nc):
    """The controller batch job (profiles/*/controller.pbs) deleted with ``qdel`` or at its
    walltime: PBS sends SIGTERM, Snakemake waits for its running jobs, and PBS kills it
    with SIGKILL (``kill_delay``), leaving Snakemake's lock. The next controller job runs
    on another node, where the lock "from another host" was kept and Snakemake refused
    the run ("Directory cannot be locked"). The record now holds the controller's own PBS
    job id: while that job is live the lock is kept; once PBS says it ended, it goes."""
    from ncreel.cluster import pbs as ncpbs

    work = workdir(tmp_path_factory, sample_nc, "pbs_controller")
    (work / ".snakemake").mkdir()
    (work / "logs").mkdir()
    script = _jobscript(work / ".snakemake" / "controller.sh", "sleep 300", "controller")
    cmd = ncpbs.build_qsub(ncpbs.read_properties(script), str(script), queue="share",
                           account=ACCOUNT, log_dir=str(work / "logs"))
    controller = subprocess.run([cmd[0], "-h", *cmd[1:]], cwd=work, env=pbs_env(),
                                capture_output=True, text=True, check=True).stdout.strip()
    locks = work / ".snakemake/locks"
    locks.mkdir()
    (locks / "0.output.lock").write_text("results/demo/stats.json\n")
    record = work / ".snakemake/ncreel-run.json"
    old = {"host": "compute-node-7", "pid": 4242, "scheduler": "pbs", "jobid": controller}
    record.write_text(json.dumps(old))
    try:
        out = snakemake(work, "-n", "--profile", "profiles/cheyenne", PBS_ACCOUNT=ACCOUNT)
        assert "removed the stale lock" not in out and list(locks.iterdir())  # still live
        # ... and its record too: a command on this host left its own ended pid there,
        # which the next command here took for the killed run's.
        assert json.loads(record.read_text()) == old
        subprocess.run([QDEL, controller], check=True, env=pbs_env(), timeout=60)
        wait_finished(controller)
        out = snakemake(work, "-n", "--profile", "profiles/cheyenne", PBS_ACCOUNT=ACCOUNT)
        assert "ncreel: removed the stale lock of a killed run; resuming" in out, out[-3000:]
        assert not list(locks.iterdir())
    finally:
        subprocess.run([QDEL, controller], capture_output=True, env=pbs_env())
