"""Job arrays of the PBS Pro executor (``--executor pbs-pro``) on the REAL PBS server.

Nothing is mocked: ``snakemake --profile profiles/cheyenne`` submits with OpenPBS's own
``qsub -J`` (``/opt/pbs/bin`` first on PATH, asserted by :func:`test_pbs.pbs_env`),
and what PBS ran is read back with ``qstat -x -f -t``. The memory kill is MoM's (``$enforce
mem``). These tests FAIL (never skip) when PBS is not up.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import ROOT
from snakemake_executor_plugin_pbs_pro.job_status_query import parse_torque
from snakemake_executor_plugin_pbs_pro.submit_string import DEFAULT_JOB_OVERHEAD_MB, request_mem_mb
from test_pbs import ACCOUNT, FAST, QSTAT, job_overhead_mb, pbs_env, snakemake
from test_pbs import pbs as pbs_server  # noqa: F401  (its `pbs` fixture)
from test_slurm import ROWS, count_rows, declared_jobs, workdir
from workflow_run import SMALL

pytestmark = [pytest.mark.pbs, pytest.mark.integration, pytest.mark.usefixtures("pbs_server")]

CHEYENNE = str(ROOT / "profiles" / "cheyenne")


def qstat_text(*ids: str) -> dict[str, dict]:
    """``qstat -x -f -t`` records of `ids` (arrays with their sub-jobs), one call."""
    proc = subprocess.run([QSTAT, "-x", "-f", "-t", *ids], capture_output=True, text=True,
                          timeout=60)
    return parse_torque(proc.stdout)


def qsub_lines(work: Path) -> list[str]:
    return [p.read_text().strip() for p in sorted((work / "logs/pbs").glob("*.qsub"))]


def manifests(work: Path) -> list[dict]:
    return [json.loads(p.read_text())["jobs"]
            for p in sorted((work / ".snakemake/pbs-pro/arrays").glob("*.json"))]


def array_ids(log: str) -> list[str]:
    return re.findall(r"as PBS job array (\S+) ", log)


def test_render_shards_go_out_as_one_array(tmp_path_factory, sample_nc):
    """Four shards through ``--profile profiles/cheyenne``: ONE ``qsub -J 0-3``; every
    sub-job ran the shard its index names in the manifest (its log says which), asked
    for the shard's declared mem_mb plus the executor's overhead, ended with Exit_status
    0; the shards hold exactly the sample's rows."""
    work = workdir(tmp_path_factory, sample_nc, "pbs_array")
    shards = [f"results/demo/cells/{i:05d}.copy" for i in range(4)]
    log = snakemake(work, "--profile", CHEYENNE, "--config", *SMALL, "frames_per_shard=60",
                    "--", *shards, PBS_ACCOUNT=ACCOUNT)
    assert sum(count_rows(work / s) for s in shards) == ROWS
    arrays = [q for q in qsub_lines(work) if " -J " in q]
    assert len(arrays) == 1 and " -J 0-3 " in arrays[0], arrays
    assert not [q for q in qsub_lines(work) if "nc_process_shard_" in q]  # no single shards
    (array_id,) = array_ids(log)
    (entries,) = manifests(work)
    assert sorted(e["wildcards"]["shard"] for e in entries) == [f"{i:05d}" for i in range(4)]
    declared = declared_jobs(log)
    recs = qstat_text(array_id)
    tag = Path(arrays[0].split(" -o ")[1].split()[0].strip("'")).name.split(".")[1]
    for e in entries:
        sub = array_id.replace("[]", f"[{e['index']}]")
        rec = recs[sub]
        assert rec["job_state"] == "F" and rec["Exit_status"] == "0", (sub, rec.get("comment"))
        extra = job_overhead_mb(rec)  # the profile's pbs-pro-job-overhead-mb
        assert extra >= DEFAULT_JOB_OVERHEAD_MB, (sub, extra)
        assert rec["Resource_List.mem"] == \
            f"{request_mem_mb(declared[str(e['jobid'])][-1]['mem_mb'], extra)}mb", sub
        sublog = (work / f"logs/pbs/nc_process_shard.{tag}.{e['index']}.log").read_text()
        shard = e["wildcards"]["shard"]
        assert f"sub-job {sub} runs Snakemake job {e['jobid']} (process_shard " \
               f"{{\"shard\": \"{shard}\"}})" in sublog
        assert (work / f"results/demo/segments/{shard}.mp4").stat().st_size > 0


HOG = """
rule all:
    input: expand("out/{i}.txt", i=range(3))

rule hog:
    output: "out/{i}.txt"
    threads: 1
    resources:
        mem_mb=lambda wc, attempt: 450 if attempt == 1 else 1500,
        runtime=5,
    shell:
        "echo $PBS_JOBID >> attempts_{wildcards.i}; "
        "if [ {wildcards.i} = 1 ]; then python3 -c 'import time; b = b\\"x\\" * (900 << 20); "
        "time.sleep(20)'; fi; echo done > {output}"
"""


def test_memory_killed_array_element_is_retried_alone(tmp_path):
    """Element 1 of a three-job array allocates 900 MB under a 450 MB request: MoM kills
    it (Exit_status -27); only that job is resubmitted, as a plain job asking for
    1500 MB (each plus the executor's overhead), and succeeds; elements 0 and 2 ran once."""
    (tmp_path / "Snakefile").write_text(HOG)
    log = snakemake(tmp_path, "--profile", CHEYENNE, "--pbs-pro-array-rules", "hog",
                    PBS_ACCOUNT=ACCOUNT, SNAKEMAKE_PBS_PRO_QUEUE="workq")
    (array_id,) = array_ids(log)
    (entries,) = manifests(tmp_path)
    index = {e["wildcards"]["i"]: e["index"] for e in entries}
    recs = qstat_text(array_id)
    killed = recs[array_id.replace("[]", f"[{index['1']}]")]
    extra = job_overhead_mb(killed)  # the job's own Snakemake, added by the executor
    assert killed["Exit_status"] == "-27", killed
    assert killed["Resource_List.mem"] == f"{request_mem_mb(450, extra)}mb", killed
    for i in ("0", "2"):
        assert recs[array_id.replace("[]", f"[{index[i]}]")]["Exit_status"] == "0"
        assert len((tmp_path / f"attempts_{i}").read_text().split()) == 1
    first, retry = (tmp_path / "attempts_1").read_text().split()
    assert first.startswith(array_id.split("[")[0] + "[") and "[" not in retry
    plain = qstat_text(retry)[retry]
    assert plain["Exit_status"] == "0" and plain["Resource_List.mem"] == f"{1500 + extra}mb"
    lines = qsub_lines(tmp_path)
    assert len(lines) == 2 and sum(" -J 0-2 " in q for q in lines) == 1, lines
    assert all((tmp_path / f"out/{i}.txt").read_text() == "done\n" for i in range(3))


SLOW = """
rule all:
    input: expand("out/{i}.txt", i=range(2))

rule slow:
    output: "out/{i}.txt"
    threads: 1
    resources: mem_mb=400, runtime=5
    shell: "echo $PBS_JOBID >> runs_{wildcards.i}; sleep 15; echo done > {output}"
"""


def test_kill_and_resume_with_array_in_flight(tmp_path):
    """SIGKILL snakemake while its array runs; the same command again re-attaches to the
    array's sub-jobs instead of submitting them again: every element ran exactly once,
    one qsub in all, and no job of the killed run is left in qstat."""
    (tmp_path / "Snakefile").write_text(SLOW)
    cmd = [sys.executable, "-m", "snakemake", *FAST, "--profile", CHEYENNE,
           "--pbs-pro-array-rules", "slow", "--rerun-incomplete"]
    env = pbs_env(PBS_ACCOUNT=ACCOUNT, SNAKEMAKE_PBS_PRO_QUEUE="workq")
    with subprocess.Popen(cmd, cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, start_new_session=True) as proc:
        deadline, out = time.time() + 240, ""
        try:
            while not list(tmp_path.glob("runs_*")):
                assert time.time() < deadline and proc.poll() is None, out
                time.sleep(0.5)
        finally:
            os.killpg(proc.pid, signal.SIGKILL)
        out = proc.stdout.read()
    (array_id,) = array_ids(out)
    assert any(r["job_state"] in "QRB" for r in qstat_text(array_id).values())
    # A killed run leaves Snakemake's lock; ncreel's Snakefile clears it itself
    # (ncreel.cluster.runlock), this bare test workflow needs --unlock.
    subprocess.run([*cmd, "--unlock"], cwd=tmp_path, env=env, check=True,
                   capture_output=True)
    log = snakemake(tmp_path, "--profile", CHEYENNE, "--pbs-pro-array-rules", "slow",
                    "--rerun-incomplete", PBS_ACCOUNT=ACCOUNT, SNAKEMAKE_PBS_PRO_QUEUE="workq")
    assert "Re-attaching" in log and not array_ids(log)
    assert len(qsub_lines(tmp_path)) == 1
    for i in range(2):
        assert (tmp_path / f"runs_{i}").read_text().split() == [
            array_id.replace("[]", f"[{j}]") for j in [
                e["index"] for e in manifests(tmp_path)[0] if e["wildcards"]["i"] == str(i)]]
        assert (tmp_path / f"out/{i}.txt").read_text() == "done\n"
    assert all(r["job_state"] == "F" for r in qstat_text(array_id).values())


def test_ctrl_c_deletes_the_whole_array(tmp_path):
    """Ctrl-C (SIGINT) while an array runs: one ``qdel`` of ``<n>[]`` ends every
    sub-job, running and queued, within seconds."""
    (tmp_path / "Snakefile").write_text(SLOW.replace("sleep 15", "sleep 120"))
    cmd = [sys.executable, "-m", "snakemake", *FAST, "--profile", CHEYENNE,
           "--pbs-pro-array-rules", "slow"]
    env = pbs_env(PBS_ACCOUNT=ACCOUNT, SNAKEMAKE_PBS_PRO_QUEUE="workq")
    with subprocess.Popen(cmd, cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True) as proc:
        out, deadline = "", time.time() + 120
        while not array_ids(out):
            assert time.time() < deadline and proc.poll() is None, out
            out += proc.stdout.readline()
        (array_id,) = array_ids(out)
        time.sleep(3)
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=120)
    deadline = time.time() + 60
    while (states := {r["job_state"] for r in qstat_text(array_id).values()}) != {"F"}:
        assert time.time() < deadline, states
        time.sleep(1)
    assert not list(tmp_path.glob("out/*.txt"))


def test_queued_sub_jobs_of_a_deleted_array_are_deleted_not_failed(tmp_path):
    """``qdel 123[]`` while sub-jobs run and others are queued. Until the running ones are
    gone (their script ignores SIGTERM, so for the MoM's ``kill_delay``), OpenPBS shows
    each queued one as ``X``, comment ``Subjob finished``, with the array's substate (70)
    and later its ``Exit_status`` (1): the executor took them for failed and Snakemake's
    ``retries`` resubmitted them as a new array (seen through ``--profile cheyenne``).
    They are deleted, like the running ones; a sub-job that ran keeps its own verdict."""
    from ncreel.cluster.runstatus import scheduler_state
    from snakemake_executor_plugin_pbs_pro.job_status_query import statuses
    from snakemake_executor_plugin_pbs_pro.state import marker_path

    script = tmp_path / "ignore_term.sh"
    script.write_text("#!/bin/sh\ntrap '' TERM\nsleep 120\n")
    qsub = ["qsub", "-A", ACCOUNT, "-q", "share", "-J", "0-9", "-o", str(tmp_path),
            "-j", "oe", "-l", "select=1:ncpus=1:mem=50mb,walltime=00:03:00", str(script)]
    array = subprocess.run(qsub, capture_output=True, text=True, check=True,
                           env=pbs_env(), cwd=tmp_path).stdout.strip()
    subs = [array.replace("[]", f"[{i}]") for i in range(10)]
    state_dir = tmp_path / "state"
    try:
        deadline = time.time() + 120
        while not any(r.get("job_state") == "R" for r in qstat_text(array).values()):
            assert time.time() < deadline, "no sub-job started"
            time.sleep(0.5)
        before = {j: r.get("job_state") for j, r in qstat_text(array).items() if j in subs}
        queued = [j for j in subs if before.get(j) == "Q"]
        assert queued, before  # 10 one-core sub-jobs on one small node
        # ncreel status says which are queued (it said "running" for all).
        running = next(j for j in subs if before.get(j) == "R")
        assert scheduler_state("pbs", queued[0]) == "queued"
        assert scheduler_state("pbs", running) == "running"
        # A sub-job that ran and recorded its status through its wrapper keeps it.
        marker = marker_path(queued[-1], state_dir)
        marker.parent.mkdir(parents=True, exist_ok=True)
        marker.write_text("0\n")
        subprocess.run(["qdel", array], check=True, env=pbs_env(), timeout=60)
        time.sleep(1)
        recs = qstat_text(array)
        assert recs[array]["job_state"] == "B", recs[array]  # still killing the runners
        deleted = {}
        got = statuses(queued, state_dir=state_dir, qstat=QSTAT, deleted=deleted,
                       log=lambda msg: None)
        assert got == {**{j: "deleted" for j in queued[:-1]}, queued[-1]: "success"}, \
            ({j: (recs[j].get("job_state"), recs[j].get("comment")) for j in queued}, got)
        assert all("before it started" in deleted[j] for j in queued[:-1]), deleted
    finally:
        subprocess.run(["qdel", "-W", "force", array], env=pbs_env(), capture_output=True)
