"""The workflow on a REAL single-node Slurm (``.ci/slurm-up.sh``: slurmctld, slurmd,
slurmdbd + MariaDB, OverMemoryKill memory enforcement, Torque/PBS wrappers).

Nothing here is mocked: jobs are submitted with sbatch (profiles/slurm) or with the
Torque/PBS ``qsub`` wrapper (profiles/cheyenne), and what Slurm ran is read back from
``sacct``. These tests FAIL (never skip) when Slurm is not up; as root, the session
fixture starts it with ``.ci/slurm-up.sh`` first.
"""

from __future__ import annotations

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
from workflow_run import SMALL, make_workdir

pytestmark = [pytest.mark.slurm, pytest.mark.integration]

ACCOUNT, PARTITION = "ncreel", "debug"
ROWS = 435_120  # 240 steps x 37 x 49 cells of the sample


@pytest.fixture(scope="session")
def slurm():
    """A working Slurm with accounting; started with .ci/slurm-up.sh when possible."""
    def up():
        return subprocess.run(["sinfo", "-h"], capture_output=True).returncode == 0 and \
            subprocess.run(["sacct", "-n", "-X", "-S", "now"], capture_output=True).returncode == 0
    if not (shutil.which("sinfo") and up()) and os.geteuid() == 0:
        subprocess.run(["bash", str(ROOT / ".ci/slurm-up.sh")], check=False)
    if not (shutil.which("sinfo") and up()):
        pytest.fail("Slurm is not running: run `sudo bash .ci/slurm-up.sh` "
                    "(see docs/development.md)")
    return True


def workdir(tmp_path_factory, sample_nc, name):
    work = make_workdir(tmp_path_factory.mktemp(name))
    (work / "resources").mkdir()
    shutil.copy(sample_nc, work / "resources" / "A1B_north_america.nc")
    return work


def env(**extra):
    e = dict(os.environ)
    e.pop("SNAKEMAKE_PROFILE", None)
    e["PATH"] = f"{Path(sys.executable).parent}:{e.get('PATH', '')}"
    e.update(extra)
    return e


# Test-only: poll the scheduler more often than the profiles do (they are tuned for big
# shared clusters), to keep these tests short. The Slurm plugin (2.8) does not keep
# --seconds-between-status-checks: after every check that saw a job end (and before the
# first) it waits --slurm-init-seconds-before-status-checks (profile: 20 s), growing by
# 10 s per check that saw none, so each wave of jobs (statistics, calibration, shards,
# reduce, ...) cost 20-50 s of waiting; 2 s makes it a few seconds.
FAST_POLL = ["--seconds-between-status-checks", "5",
             "--slurm-init-seconds-before-status-checks", "2"]


def run_snakemake(work, *args, timeout=900, **envs):
    cmd = [sys.executable, "-m", "snakemake", *FAST_POLL, *args]
    proc = subprocess.run(cmd, cwd=work, capture_output=True, text=True, env=env(**envs),
                          timeout=timeout)
    (work / "snakemake.out").write_text(proc.stdout + proc.stderr)
    if proc.returncode != 0:
        raise AssertionError(f"{' '.join(cmd)} failed:\n{(proc.stdout + proc.stderr)[-6000:]}")
    return proc.stdout + proc.stderr


def declared_jobs(log: str) -> dict[str, dict]:
    """Snakemake job id -> rule, mem_mb, threads (from the job blocks Snakemake prints)."""
    jobs = {}
    for block in re.split(r"\n(?=\[\w{3} \w{3} )", log):
        m = re.search(r"^(?:local)?(?:rule|checkpoint) (\w+):", block, re.M)
        jid = re.search(r"^\s+jobid: (\d+)", block, re.M)
        mem = re.search(r"resources: .*?\bmem_mb=(\d+)", block)
        if m and jid and mem:
            thr = re.search(r"^\s+threads: (\d+)", block, re.M)
            jobs.setdefault(jid.group(1), []).append(
                {"rule": m.group(1), "mem_mb": int(mem.group(1)),
                 "threads": int(thr.group(1)) if thr else 1})
    return jobs


def slurm_ids(log: str) -> dict[str, str]:
    """Slurm job id (array tasks: ``A_i``) -> Snakemake job id, from the plugin's messages."""
    out = {}
    for sm, sl in re.findall(r"Job (\d+) has been submitted with SLURM jobid (\d+)", log):
        out[sl] = sm
    for sms, sl in re.findall(r"Snakemake IDs ([\d,]+) and SLURM job ID (\d+)", log):
        for i, sm in enumerate(sms.split(","), start=1):
            out[f"{sl}_{i}"] = sm
    return out


def sacct(work: Path, since: str) -> list[dict]:
    """Jobs Slurm ran from `work` since `since` (waits out sacct's incomplete records)."""
    fields = ["JobID", "JobName", "State", "ExitCode", "ReqMem", "ReqCPUS", "WorkDir"]
    for _ in range(30):
        proc = subprocess.run(["sacct", "-X", "-n", "-P", "-a", "-S", since, "--format",
                               ",".join(f"{f}%300" for f in fields)],
                              capture_output=True, text=True, check=True)
        lines = [ln for ln in proc.stdout.splitlines() if ln]
        rows = [dict(zip(fields, ln.split("|"), strict=True)) for ln in lines]
        rows = [r for r in rows if Path(r["WorkDir"]) == work]
        if rows and all(r["JobName"] != "allocation" and r["State"] not in
                        ("PENDING", "RUNNING", "COMPLETING") for r in rows):
            return rows
        time.sleep(1)
    raise AssertionError(f"sacct has no final records for {work}: {rows}")


def mem_mb(reqmem: str) -> int:
    m = re.fullmatch(r"(\d+(?:\.\d+)?)([KMGT]?)n?c?", reqmem)
    assert m, reqmem
    return int(float(m.group(1)) * {"K": 1 / 1024, "": 1, "M": 1, "G": 1024,
                                    "T": 1024**2}[m.group(2)])


def count_rows(path: Path) -> int:
    with open(path, "rb") as fh:
        return sum(1 for _ in fh)


def now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(time.time() - 2))


SLURM_ENV = {"SBATCH_ACCOUNT": ACCOUNT, "SBATCH_PARTITION": PARTITION}
#: Secret-looking variables in the user's shell: no other user may see them.
SECRETS = {"PGPASSWORD": "pw-only-for-this-test", "MY_API_TOKEN": "tok-only-for-this-test",
           "AWS_ACCESS_KEY_ID": "AKIAONLYFORTHISTEST", "GITHUB_TOKEN": "ghp_onlyforthis",
           "AWS_SECRET_ACCESS_KEY": "aws-secret-only-for-this-test"}


def shown_to_others(ids) -> str:
    """What user ``nobody`` sees of Slurm jobs `ids`: ``scontrol show job -dd`` (jobs
    slurmctld still holds), ``squeue --format=%all`` and every ``sacct`` field."""
    out = []
    for cmd in ([["scontrol", "show", "job", "-dd", i] for i in ids]
                + [["squeue", "-h", "--format=%all", "-j", ",".join(ids)],
                   ["sacct", "-a", "-P", "-o", "ALL", "-j", ",".join(ids)]]):
        out.append(subprocess.run(["runuser", "-u", "nobody", "--", *cmd],
                                  capture_output=True, text=True, timeout=60).stdout)
    return "\n".join(out)


def test_demo_through_slurm_profile(slurm, tmp_path_factory, sample_nc):
    """The demo through ``--profile profiles/slurm``: every job is a Slurm job that asked
    for the memory and CPUs its rule declared (sacct ReqMem/ReqCPUS).

    With tokens, AWS keys and ``PGPASSWORD`` in the user's shell, another user
    (``nobody``) sees none of them in ``scontrol show job``, ``squeue`` or ``sacct``:
    Slurm keeps a job's environment (the plugin's ``--export=ALL``) to the job."""
    work = workdir(tmp_path_factory, sample_nc, "slurm_demo")
    since = now()
    log = run_snakemake(work, "--profile", "profiles/slurm", "--config", *SMALL,
                        "frames_per_shard=60", **SLURM_ENV, **SECRETS)
    shown = shown_to_others(list(slurm_ids(log)))
    assert shown.count("JobId=") >= 1 and "WorkDir=" in shown, shown  # what others see
    for name, value in SECRETS.items():
        assert name not in shown and value not in shown, name
    assert count_rows(work / "results/demo/cells.copy") == ROWS
    assert (work / "results/demo/movie.mp4").stat().st_size > 0
    declared, ids = declared_jobs(log), slurm_ids(log)
    rows = sacct(work, since)
    seen_rules = {}
    for r in rows:
        assert r["State"] == "COMPLETED", r
        want = declared[ids[r["JobID"]]][-1]
        seen_rules[want["rule"]] = seen_rules.get(want["rule"], 0) + 1
        got = mem_mb(r["ReqMem"])
        # Array tasks get the plugin's small "memory fudge" for the encoded payload (<= a few MB).
        assert want["mem_mb"] <= got <= want["mem_mb"] + 8, (r, want)
        assert int(r["ReqCPUS"]) == want["threads"], (r, want)
    assert seen_rules == {"statistics": 1, "calibrate_render": 1, "process_shard": 4,
                          "reduce_cells": 1, "concat_segments": 1, "preview": 1}
    # Each shard ran exactly once, as its own job (arrays are off: see profiles/slurm).
    assert not [r for r in rows if "_" in r["JobID"]]
    # The controller's terminal: shard progress, read without asking Slurm, and a last line.
    progress = re.findall(r"^ncreel: shards (\d+)/4 done\b.*$", log, flags=re.M)
    assert progress and progress[-1] == "4", log[-3000:]
    assert re.search(r"^ncreel: shards 4/4 done · .* in all$", log, flags=re.M)


def test_memory_killed_shard_is_retried_with_more_memory(slurm, tmp_path_factory, sample_nc):
    """Shard 00001's first attempt declares 150 MB, less than it needs: Slurm kills it
    (OverMemoryKill: FAILED 0:9), Snakemake resubmits it asking for more, and it succeeds."""
    work = workdir(tmp_path_factory, sample_nc, "slurm_oom")
    since = now()
    log = run_snakemake(
        work, "--profile", "profiles/slurm", "--config", *SMALL, "frames_per_shard=60",
        "--set-resources",
        "process_shard:mem_mb=150 if attempt == 1 else 1200", "--",
        "results/demo/cells/00001.copy", **SLURM_ENV)
    assert (work / "results/demo/cells/00001.copy").stat().st_size > 0
    ids = slurm_ids(log)
    declared = declared_jobs(log)
    shard = [r for r in sacct(work, since)
             if declared[ids[r["JobID"]]][0]["rule"] == "process_shard"]
    assert len(shard) == 2, shard
    first, second = sorted(shard, key=lambda r: int(r["JobID"].split("_")[0]))
    assert first["State"] in ("FAILED", "OUT_OF_MEMORY"), first
    assert first["State"] == "OUT_OF_MEMORY" or first["ExitCode"] == "0:9", first
    assert second["State"] == "COMPLETED", second
    assert mem_mb(first["ReqMem"]) == 150 and mem_mb(second["ReqMem"]) >= 1200
    # Slurm's own log of the killed attempt says why.
    killed = work / "logs/slurm/rule_process_shard/00001" / f"{first['JobID']}.log"
    assert "exceeded memory limit" in killed.read_text()


# The PBS profiles use ncreel's pbs-pro executor (tested on a real PBS Pro server in
# test_pbs.py / test_pbs_arrays.py). Sites without it keep Snakemake's cluster-generic
# executor with ncreel_pbs.py's submit/status commands, which also read Torque-style qstat.
CLUSTER_GENERIC_PBS = [
    "--executor", "cluster-generic",
    "--cluster-generic-submit-cmd",
    "python3 workflow/scripts/ncreel_pbs.py submit --queue share --max-walltime 06:00:00",
    "--cluster-generic-status-cmd", "python3 workflow/scripts/ncreel_pbs.py status",
    "--cluster-generic-cancel-cmd", "qdel",
]


def test_cluster_generic_pbs_commands_through_torque_wrappers(slurm, tmp_path_factory,
                                                              sample_nc):
    """``--profile profiles/cheyenne`` with the cluster-generic executor and ncreel_pbs.py,
    end to end against Slurm's Torque/PBS wrappers: submit through ``qsub -l select=...``
    (the wrapper turns it into sbatch), status through ``qstat -f`` (Torque style, no exit
    status) plus the recorded exit status. Only the queue is overridden
    (SNAKEMAKE_PBS_PRO_QUEUE): there is no ``share`` queue here."""
    work = workdir(tmp_path_factory, sample_nc, "pbs_demo")
    since = now()
    log = run_snakemake(work, "--profile", "profiles/cheyenne", *CLUSTER_GENERIC_PBS,
                        "--config", *SMALL, "frames_per_shard=120", "scheduler=pbs",
                        PBS_ACCOUNT=ACCOUNT,
                        SNAKEMAKE_PBS_PRO_QUEUE=PARTITION)
    assert count_rows(work / "results/demo/cells.copy") == ROWS
    assert (work / "results/demo/movie.mp4").stat().st_size > 0
    rows = sacct(work, since)
    names = sorted(r["JobName"] for r in rows)
    assert names == sorted(["nc_calibrate_render", "nc_concat_segments", "nc_preview",
                            "nc_reduce_cells", "nc_process_shard_00000",
                            "nc_process_shard_00001", "nc_statistics"])
    declared = declared_jobs(log)
    submitted = re.findall(r"Submitted job (\d+) with external jobid '(\d+)'", log)
    ids = {sl: sm for sm, sl in submitted}
    for r in rows:
        assert r["State"] == "COMPLETED", r
        want = declared[ids[r["JobID"]]][-1]
        # What was asked of qsub (recorded next to the job's log by the submit helper)...
        qsub = (work / "logs/pbs" / f"{r['JobName']}.{ids[r['JobID']]}.qsub").read_text()
        assert f"select=1:ncpus={want['threads']}:mem={want['mem_mb']}MB,walltime=" in qsub
        # ...and what Slurm made of it: the wrapper maps mem to --mem, but ncpus only to
        # --mincpus (a node constraint), so ReqCPUS stays 1 -- a limit of Slurm's
        # wrapper, not of PBS Pro, where ncpus allocates the cores.
        assert mem_mb(r["ReqMem"]) == want["mem_mb"], (r, want)
        assert int(r["ReqCPUS"]) == 1, r
    # Each job's joined log is where the profile put it; each recorded its exit status 0.
    assert len(list((work / "logs/pbs").glob("nc_process_shard_0000*.log"))) == 2
    markers = list((work / ".snakemake/pbs-pro").glob("*.exit"))
    assert len(markers) == 7 and {m.read_text().strip() for m in markers} == {"0"}


def _fake_jobscript(path: Path, body: str, mem_mb: int, rule: str = "probe") -> Path:
    props = {"type": "single", "rule": rule, "wildcards": {}, "threads": 1,
             "resources": {"mem_mb": mem_mb, "runtime": 2}, "jobid": 1}
    path.write_text(f"#!/bin/sh\n# properties = {json.dumps(props)}\n{body}\n")
    return path


@pytest.mark.parametrize("case, body, mem, expected", [
    ("ok", "sleep 1; exit 0", 200, "success"),
    ("exit3", "exit 3", 200, "failed"),
    ("oom", "python3 -c \"a = b'x' * (400 * 2**20); import time; time.sleep(15)\"", 100,
     "failed"),
])
def test_pbs_status_on_real_wrapper_jobs(case, body, mem, expected, slurm, tmp_path,
                                        monkeypatch):
    """ncreel.cluster.pbs submit/status against the real qsub/qstat wrappers: success, a non-zero
    exit and a memory kill (the job never records an exit status) are told apart."""
    sys.path.insert(0, str(ROOT / "workflow"))
    from ncreel.cluster import pbs

    script = _fake_jobscript(tmp_path / f"snakejob.{case}.sh", body, mem, rule=case)
    monkeypatch.chdir(tmp_path)  # restored after the test: later tests use relative paths
    jobid = pbs.submit(str(script), queue=PARTITION, account=ACCOUNT, log_dir="logs",
                       state_dir="state")
    assert re.fullmatch(r"\d+", jobid)
    deadline = time.time() + 120
    while (st := pbs.status(jobid, state_dir="state", log=lambda m: None)) == "running":
        assert time.time() < deadline, "job did not finish"
        time.sleep(2)
    assert st == expected


def _incomplete(work: Path) -> set[str]:
    import base64

    d = work / ".snakemake" / "incomplete"
    return {base64.b64decode(p.name).decode() for p in d.iterdir()} if d.is_dir() else set()


def test_kill_snakemake_and_resume_on_slurm(slurm, tmp_path_factory, sample_nc):
    """SIGKILL the snakemake process while shards are queued/running in Slurm, run the
    same command again: finished shards are kept, lost ones redone, the killed run's
    leftover jobs cancelled, and the COPY file has exactly the expected rows."""
    work = workdir(tmp_path_factory, sample_nc, "slurm_resume")
    args = ["--profile", "profiles/slurm", "--config", *SMALL, "frames_per_shard=40", "--",
            "results/demo/cells.copy"]
    cells = work / "results/demo/cells"
    with subprocess.Popen([sys.executable, "-m", "snakemake", *FAST_POLL, *args], cwd=work,
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                          env=env(**SLURM_ENV), start_new_session=True) as proc:
        deadline = time.time() + 600
        def finished():  # shards Snakemake has seen succeed (no longer marked incomplete)
            marked = _incomplete(work)
            return [p for p in cells.glob("*.copy")
                    if f"results/demo/cells/{p.name}" not in marked]

        while time.time() < deadline and len(finished()) < 2:
            assert proc.poll() is None, "snakemake ended before it could be killed"
            time.sleep(0.5)
        proc.send_signal(signal.SIGKILL)  # snakemake only: its Slurm jobs keep going
    queued = subprocess.run(["squeue", "-h", "-o", "%i|%Z"], capture_output=True,
                            text=True).stdout
    assert str(work) in queued, "some shards should still be queued or running in Slurm"
    incomplete = _incomplete(work)
    done = {p: hashlib.sha256(p.read_bytes()).hexdigest() for p in cells.glob("*.copy")
            if f"results/demo/cells/{p.name}" not in incomplete}
    assert 2 <= len(done) < 6
    log = run_snakemake(work, *args, **SLURM_ENV)  # the same command again
    assert "cancelled Slurm job" in log or "removed the stale lock" in log
    assert count_rows(work / "results/demo/cells.copy") == ROWS
    # Finished shards were not redone: the rerun ran no job for them, their rows are the
    # same. (Not mtimes: on Slurm a finished job's step can still touch its outputs for a
    # few seconds after Snakemake saw it succeed.)
    for p in done:
        assert f"wildcards: shard={p.stem}" not in log, f"shard {p.stem} was redone"
    assert {p: hashlib.sha256(p.read_bytes()).hexdigest() for p in done} == done
    assert len(list(cells.glob("*.copy"))) == 6
    assert not list(work.glob("results/demo/**/*.part"))
    assert str(work) not in subprocess.run(["squeue", "-h", "-o", "%i|%Z"],
                                           capture_output=True, text=True).stdout


def test_shell_metacharacters_reach_slurm_jobs_unchanged(slurm, tmp_path_factory):
    """Every shell metacharacter and `{x}` in the table, the variable, the input path and
    ``slurm-logdir`` (backslash aside: Slurm reads it in --output patterns), given with
    ``--config``: the plugin puts each job's command in ``sbatch --wrap="..."``, which the
    login node's shell expands, yet nothing is executed and the jobs used exactly the
    checked names (tests/odd_text.py)."""
    from odd_text import check_odd_run, config_args, payload, write_odd_input

    work = make_workdir(tmp_path_factory.mktemp("slurm_odd"))
    values = write_odd_input(work)
    logdir = "logs/" + payload("l", backslash=False)
    log = run_snakemake(work, "--profile", "profiles/slurm", "--slurm-logdir", logdir,
                  "--config", *SMALL,
                  "frames_per_shard=4", *config_args(values), "--", "results/demo/cells.sql",
                  **SLURM_ENV)
    check_odd_run(work, values)
    # (The plugin removes the logs of successful jobs; it names each where Slurm wrote it.)
    assert len(re.findall(rf"\(log: {re.escape(str(work / logdir))}/rule_\w+/", log)) == 4


def leave_killed_run_beside_live_one(work: Path, demo_jobid: str) -> Path:
    """Leave in `work` what a killed run ``demo`` leaves beside a live run ``other``.

    Both runs' Snakemake lock files, ``demo``'s run record (a dead pid on this host) and
    `demo_jobid` in the marker of the output its queued job makes. Returns the locks
    directory.
    """
    from ncreel.run.incomplete import marker_path
    from test_cluster_runlock import dead_pid

    locks = work / ".snakemake/locks"
    locks.mkdir(parents=True)
    for i, run in enumerate(("demo", "other")):
        (locks / f"{i}.output.lock").write_text(f"results/{run}/segments/00000.mp4\n")
    (work / ".snakemake/ncreel-run.json").write_text(
        json.dumps({"host": os.uname().nodename, "pid": dead_pid()}))
    marker = marker_path(work, "results/demo/segments/00000.mp4")
    marker.parent.mkdir(parents=True)
    marker.write_text(json.dumps({"external_jobid": demo_jobid}))
    return locks


def test_resume_beside_a_live_run_cancels_only_the_killed_runs_jobs(slurm, tmp_path_factory,
                                                                      sample_nc):
    """Run ``demo`` was killed (SIGKILL) with a shard job queued in Slurm; run ``other`` is
    live in the same directory, its Snakemake on another host (seen here only by its run
    lock, held by flock), with a job of its own in Slurm. The same command as ``demo``'s
    (a dry run reads the workflow the same way) cancels ``demo``'s job only and removes
    only ``demo``'s Snakemake lock files. Before, it cancelled ``other``'s job too."""
    from test_cluster_runlock import hold_elsewhere

    work = workdir(tmp_path_factory, sample_nc, "slurm_beside")

    def submit(run):
        out = subprocess.run(
            ["sbatch", "--parsable", "--chdir", str(work), "-o", "/dev/null", "-t", "5",
             "--mem", "50", "--job-name", f"uuid-of-{run}",
             "--comment", "rule_process_shard_wildcards_shard=00000", "--wrap", "sleep 300"],
            capture_output=True, text=True, check=True, env=env(**SLURM_ENV)).stdout
        return out.strip().split(";")[0]

    def in_queue():
        return set(subprocess.run(["squeue", "-h", "-o", "%i"], capture_output=True,
                                  text=True, check=True).stdout.split())

    ids = {run: submit(run) for run in ("demo", "other")}
    try:
        locks = leave_killed_run_beside_live_one(work, ids["demo"])
        with hold_elsewhere(work / "results/other/.ncreel-run.lock") as other:
            try:
                proc = subprocess.run(
                    [sys.executable, "-m", "snakemake", "-n", "--profile", "profiles/slurm"],
                    cwd=work, capture_output=True, text=True, env=env(**SLURM_ENV),
                    timeout=300)
            finally:
                other.kill()
        out = proc.stdout + proc.stderr
        (work / "snakemake.out").write_text(out)
        assert f"ncreel: cancelled Slurm job {ids['demo']} of the killed run" in out, out[-3000:]
        assert f"Slurm job {ids['other']}" not in out
        assert ids["other"] in in_queue()
        assert ids["demo"] not in in_queue()
        assert sorted(p.name for p in locks.iterdir()) == ["1.output.lock"]
    finally:
        subprocess.run(["scancel", *ids.values()], check=False)


def test_unknown_partition_stops_before_any_job(slurm, tmp_path_factory, sample_nc):
    """A partition the cluster does not have (here holding shell text) is one line before
    any job; before, every job's sbatch failed, and again for each retry."""
    work = workdir(tmp_path_factory, sample_nc, "slurm_partition")
    marker = work / "ran"
    proc = subprocess.run(
        [sys.executable, "-m", "snakemake", *FAST_POLL, "--profile", "profiles/slurm",
         "--", "results/demo/stats.json"], cwd=work, capture_output=True, text=True,
        env=env(SBATCH_ACCOUNT=ACCOUNT, SBATCH_PARTITION=f"nosuch$(touch {marker})"),
        timeout=300)
    out = proc.stdout + proc.stderr
    lines = [ln for ln in out.splitlines() if ln.startswith("ncreel: error:")]
    assert proc.returncode != 0 and len(lines) == 1, out[-3000:]
    assert lines[0].startswith(f"ncreel: error: SBATCH_PARTITION names 'nosuch$(touch {marker})'"
                               ", which is not a partition of this cluster"), lines
    assert "sbatch" not in out and "Submitted" not in out and not marker.exists()


def test_resubmitted_controller_on_another_node_resumes_once_the_old_one_ended(
        slurm, tmp_path_factory, sample_nc):
    """Slurm twin of test_pbs's: ``scancel`` of the controller job (or its time limit)
    sends SIGTERM, Snakemake waits for its running jobs and Slurm kills it (``KillWait``),
    leaving Snakemake's lock; the next controller job, on another node, removes it once
    ``sacct`` says the old controller's job ended, not while it runs."""
    work = workdir(tmp_path_factory, sample_nc, "slurm_controller")
    controller = subprocess.run(
        ["sbatch", "--parsable", "--hold", "--chdir", str(work), "-o", "/dev/null", "-t", "5",
         "--mem", "50", "--wrap", "sleep 300"], capture_output=True, text=True, check=True,
        env=env(**SLURM_ENV)).stdout.strip().split(";")[0]
    locks = work / ".snakemake/locks"
    locks.mkdir(parents=True)
    (locks / "0.output.lock").write_text("results/demo/stats.json\n")
    record = work / ".snakemake/ncreel-run.json"
    old = {"host": "compute-node-7", "pid": 4242, "scheduler": "slurm", "jobid": controller}
    record.write_text(json.dumps(old))

    def dry_run():
        return subprocess.run([sys.executable, "-m", "snakemake", "-n", "--profile",
                               "profiles/slurm"], cwd=work, capture_output=True, text=True,
                              env=env(**SLURM_ENV), timeout=300)

    try:
        out = dry_run()
        assert "removed the stale lock" not in out.stderr and list(locks.iterdir())
        assert json.loads(record.read_text()) == old
        subprocess.run(["scancel", controller], check=True)
        deadline = time.time() + 60
        while "CANCELLED" not in subprocess.run(
                ["sacct", "-n", "-X", "-P", "-j", controller, "-o", "State"],
                capture_output=True, text=True).stdout:
            assert time.time() < deadline
            time.sleep(1)
        out = dry_run()
        assert "ncreel: removed the stale lock of a killed run; resuming" in out.stderr, \
            out.stderr[-3000:]
        assert not list(locks.iterdir())
    finally:
        subprocess.run(["scancel", controller], capture_output=True)
