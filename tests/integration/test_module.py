"""ncreel used the way Snakemake users reuse workflows: as a module of their own workflow.

The user's directory is laid out as ``snakedeploy deploy-workflow`` lays it out: its
template's ``workflow/Snakefile`` (a ``module`` directive naming ncreel's Snakefile, with
``config: config``), ncreel's ``config/`` and ``profiles/`` copied beside it, plus the
rule prefix the Snakemake docs recommend (``use rule * from ncreel as ncreel_*``). The
demo runs there locally, on the real PBS Pro server and on the real Slurm, and gives what
a direct run gives: the same rows, frames, memory declarations, retries and report.
"""

from __future__ import annotations

import csv
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from test_pbs import ACCOUNT, check_jobs, frame_count, pbs  # noqa: F401
from test_pbs import snakemake as pbs_snakemake
from test_slurm import (
    ROWS,
    SLURM_ENV,
    count_rows,
    declared_jobs,
    mem_mb,
    now,
    sacct,
    slurm,  # noqa: F401
    slurm_ids,
)
from workflow_run import make_workdir, probe, snakemake

pytestmark = [pytest.mark.integration]

PREFIX = "ncreel_"
#: snakedeploy's templates/use_module.smk.jinja as deploy-workflow renders it, with the
#: rule prefix.
USER_SNAKEFILE = '''from snakemake.utils import min_version


min_version("6.10.0")


configfile: "config/config.yaml"


# declare ncreel as a module
module ncreel:
    snakefile:
        "{snakefile}"
    config:
        config


# use all rules from ncreel
use rule * from ncreel as ncreel_*
'''
RUN = ["width=160", "height=96", "dpi=40", "preset=ultrafast", "frames_per_shard=120"]


def deploy(tmp_path: Path, sample_nc: Path, name: str = "my-analysis") -> Path:
    """ncreel's files where Snakemake's module cache would hold them, and the user's own
    directory as snakedeploy makes it (its config/ and profiles/ copied, then edited)."""
    ncreel = tmp_path / "ncreel"
    if not ncreel.exists():
        ncreel.mkdir()
        make_workdir(ncreel)
    user = tmp_path / name
    (user / "workflow").mkdir(parents=True)
    (user / "workflow" / "Snakefile").write_text(
        USER_SNAKEFILE.format(snakefile=ncreel / "workflow" / "Snakefile"))
    shutil.copytree(ncreel / "config", user / "config")
    shutil.copytree(ncreel / "profiles", user / "profiles")
    (user / "resources").mkdir()
    shutil.copy(sample_nc, user / "resources" / "A1B_north_america.nc")
    (user / "config" / "config.yaml").write_text(
        "input: resources/A1B_north_america.nc\nvariable: air_temperature\nrun: demo\n"
        + "".join(f"{kv.replace('=', ': ')}\n" for kv in RUN))
    return user


def direct(tmp_path: Path, sample_nc: Path) -> Path:
    (tmp_path / "direct").mkdir()
    work = make_workdir(tmp_path / "direct")
    (work / "resources").mkdir()
    shutil.copy(sample_nc, work / "resources" / "A1B_north_america.nc")
    return work


def declared(log: str) -> dict[tuple[str, str], tuple[int, int]]:
    """(rule without the prefix, job's wildcards) -> (mem_mb, threads), as Snakemake said."""
    out = {}
    blocks = log.split("\n[")
    for block in blocks:
        head = next((ln for ln in block.splitlines()
                     if ln.startswith(("rule ", "localrule ", "checkpoint "))), None)
        mem = next((ln for ln in block.splitlines() if "mem_mb=" in ln), None)
        if head is None or mem is None:
            continue
        rule = head.split()[1].rstrip(":").removeprefix(PREFIX)
        wc = next((ln.split(":", 1)[1].strip() for ln in block.splitlines()
                   if ln.strip().startswith("wildcards:")), "")
        value = int(mem.split("mem_mb=")[1].split(",")[0])
        threads = next((int(ln.split(":")[1]) for ln in block.splitlines()
                        if ln.strip().startswith("threads:")), 1)
        out[(rule, wc)] = (value, threads)
    return out


def report_rows(work: Path) -> list[tuple[str, str]]:
    with open(work / "results/demo/report/resources.csv") as fh:
        return sorted((r["rule"], r["job"]) for r in csv.DictReader(fh))


def test_module_run_is_the_direct_run(tmp_path, sample_nc):
    """Locally: the deployed module makes the direct run's table and movie (byte for byte
    and frame for frame), declares the same mem_mb and threads for every job (under the
    prefixed rule names), and its report lists the same jobs under ncreel's own names."""
    work = direct(tmp_path, sample_nc)
    d = snakemake(work, "--config", *RUN)
    user = deploy(tmp_path, sample_nc)
    m = subprocess.run([sys.executable, "-m", "snakemake", "--cores", "2"], cwd=user,
                       capture_output=True, text=True)
    (user / "snakemake.out").write_text(m.stdout + m.stderr)
    assert m.returncode == 0, (m.stdout + m.stderr)[-5000:]
    assert "rule ncreel_process_shard:" in m.stdout + m.stderr
    for name in ("cells.copy", "cells.sql"):
        assert (user / "results/demo" / name).read_bytes() == \
            (work / "results/demo" / name).read_bytes(), name
    stats = [json.loads((w / "results/demo/stats.json").read_text()) for w in (user, work)]
    assert [{k: v for k, v in s.items() if k != "inputs"} for s in stats] == [
        {k: v for k, v in stats[1].items() if k != "inputs"}] * 2
    assert int(probe(user / "results/demo/movie.mp4")["nb_read_frames"]) == 240
    mine, theirs = declared(m.stdout + m.stderr), declared(d.stdout + d.stderr)
    assert mine == theirs and ("process_shard", "shard=00001") in mine, (mine, theirs)
    # The report: its pages, from the same jobs, named as ncreel names them.
    assert report_rows(user) == report_rows(work)
    assert ("process_shard", "00000") in report_rows(user)
    # `snakemake --report report.zip`, as the workflow catalog says to make it, and HTML.
    for name in ("report.html", "report.zip"):
        r = subprocess.run([sys.executable, "-m", "snakemake", "--cores", "1", "--report",
                            name], cwd=user, capture_output=True, text=True)
        assert r.returncode == 0, (r.stdout + r.stderr)[-3000:]
    html = (user / "report.html").read_text(errors="replace")
    assert "contact_sheet.png" in html and "resources.html" in html
    import zipfile

    names = zipfile.ZipFile(user / "report.zip").namelist()
    assert any(n.endswith("contact_sheet.png") for n in names), names


#: A decorate function that keeps one shard's first attempt drawing for 2 minutes (the
#: shard's name in slow_shard.txt): its attempts record holds one start, that of this
#: process or of its parent (a render worker). Other shards and the retry draw at once;
#: counting the starts of all shards raced when two shards started together.
SLOW_ONCE = '''
import json, os, pathlib, time


def slow_once(fig, ax, info):
    shard = pathlib.Path("slow_shard.txt").read_text().strip()
    record = pathlib.Path(f"logs/demo/process_shard/{shard}.log.attempts.jsonl")
    if not record.exists():
        return
    starts = [json.loads(ln) for ln in record.read_text().splitlines()
              if '"event": "start"' in ln]
    if len(starts) == 1 and starts[0]["pid"] in (os.getpid(), os.getppid()):
        time.sleep(120)
'''


def slow_once(user: Path, shard: str) -> Path:
    """Put :data:`SLOW_ONCE` for `shard` into `user`; return that shard's attempts record."""
    (user / "slow_once.py").write_text(SLOW_ONCE)
    (user / "slow_shard.txt").write_text(shard)
    return user / f"logs/demo/process_shard/{shard}.log.attempts.jsonl"


def test_module_retries_a_killed_shard_with_more_memory(tmp_path, sample_nc):
    """A shard killed as the kernel's out-of-memory killer kills (SIGKILL of its script) is
    retried with twice its memory: the retry reads the job's attempts record through the
    prefixed rule, as a direct run reads it."""
    user = deploy(tmp_path, sample_nc)
    attempts = slow_once(user, "00001")
    cmd = [sys.executable, "-m", "snakemake", "--cores", "2", "--retries", "1", "--config",
           "decorate=slow_once:slow_once", "--", "results/demo/cells/00001.copy"]
    with subprocess.Popen(cmd, cwd=user, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True) as proc:
        deadline = time.time() + 600
        while not (attempts.exists() and '"start"' in attempts.read_text()):
            assert proc.poll() is None and time.time() < deadline, "the shard never started"
            time.sleep(0.2)
        time.sleep(1)
        os.kill(json.loads(attempts.read_text().splitlines()[0])["pid"], signal.SIGKILL)
        out, _ = proc.communicate(timeout=600)
    (user / "snakemake.out").write_text(out)
    assert proc.returncode == 0, out[-4000:]
    mems = [int(b.split("mem_mb=")[1].split(",")[0]) for b in out.split("\n[")
            if "rule ncreel_process_shard:" in b and "mem_mb=" in b]
    assert len(mems) == 2 and mems[1] > mems[0], mems
    from ncreel.run.jobrecord import read_attempts

    assert [a["status"] for a in read_attempts(attempts)] == ["killed", "ok"] or \
        [a["status"] for a in read_attempts(attempts)] == ["running", "ok"]
    assert (user / "results/demo/cells/00001.copy").stat().st_size > 0


def run_killing_a_shard_once(user: Path, args: list[str], env: dict) -> tuple[str, str]:
    """Run Snakemake in `user` and SIGKILL the first shard's script once it works, as a
    node's out-of-memory killer would; return (its log, the killed shard)."""
    record = slow_once(user, "00000")
    cmd = [sys.executable, "-m", "snakemake", *args, "--config",
           "decorate=slow_once:slow_once"]
    with subprocess.Popen(cmd, cwd=user, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True, env=env) as proc:
        deadline = time.time() + 600
        while not (record.exists() and '"start"' in record.read_text()):
            assert proc.poll() is None and time.time() < deadline, "no shard started"
            time.sleep(0.3)
        time.sleep(2)  # into the sleeping decorate of the shard's script
        os.kill(json.loads(record.read_text().splitlines()[0])["pid"], signal.SIGKILL)
        out, _ = proc.communicate(timeout=900)
    (user / "snakemake.out").write_text(out)
    assert proc.returncode == 0, out[-5000:]
    return out, "00000"


def shard_mems(log: str, shard: str) -> list[int]:
    """mem_mb of each submission of shard `shard`'s job, in order, as Snakemake said.

    Only the controller's own job blocks: a failed job's log, which the controller prints
    after "Logfile ...:", holds the job's own Snakemake's block of it too (``reason:
    Forced execution``: a cluster job runs its one job with --force), which a busy
    machine's timing brings into the output.
    """
    return [int(b.split("mem_mb=")[1].split(",")[0]) for b in log.split("\n[")
            if f"rule {PREFIX}process_shard:" in b and f"shard={shard}" in b
            and "mem_mb=" in b and "reason: Forced execution" not in b]


@pytest.mark.slurm
def test_module_run_on_slurm(slurm, tmp_path, sample_nc):  # noqa: F811
    """Through the user's copy of ``profiles/slurm``: every job a Slurm job asking for the
    memory and CPUs its (prefixed) rule declared; a shard killed as the out-of-memory
    killer kills is resubmitted with more memory; the table and movie whole."""
    from test_slurm import env as slurm_env

    user = deploy(tmp_path, sample_nc)
    since = now()
    log, killed = run_killing_a_shard_once(
        user, ["--profile", "profiles/slurm", "--seconds-between-status-checks", "5",
               "--slurm-init-seconds-before-status-checks", "2"], slurm_env(**SLURM_ENV))
    mems = shard_mems(log, killed)
    assert len(mems) == 2 and mems[1] > mems[0], mems
    assert count_rows(user / "results/demo/cells.copy") == ROWS
    assert int(probe(user / "results/demo/movie.mp4")["nb_read_frames"]) == 240
    want, ids = declared_jobs(log), slurm_ids(log)
    seen, states = {}, {}
    for r in sorted(sacct(user, since), key=lambda r: int(r["JobID"])):
        sm = ids[r["JobID"]]
        job = want[sm][len(states.setdefault(sm, []))]  # its n-th submission
        states[sm].append(r["State"])
        seen[job["rule"]] = seen.get(job["rule"], 0) + 1
        assert job["mem_mb"] <= mem_mb(r["ReqMem"]) <= job["mem_mb"] + 8, (r, job)
        assert int(r["ReqCPUS"]) == job["threads"], (r, job)
    assert seen == {f"{PREFIX}{k}": v for k, v in {
        "statistics": 1, "calibrate_render": 1, "process_shard": 3, "reduce_cells": 1,
        "concat_segments": 1, "preview": 1}.items()}
    assert sorted(states.values()) == [["COMPLETED"]] * 6 + [["FAILED", "COMPLETED"]]
    # The report's pages were made where Snakemake runs (local rules under the prefix too).
    assert ("process_shard", "00001") in report_rows(user)


@pytest.mark.pbs
def test_module_run_on_pbs(pbs, tmp_path, sample_nc):  # noqa: F811
    """Through the user's copy of ``profiles/casper`` on the real PBS Pro server: its
    ``pbs-pro-array-rules: process_shard`` follows the prefix (the two shards are one job
    array), every job asks for its rule's mem_mb and threads and ends with Exit_status 0."""
    user = deploy(tmp_path, sample_nc)
    log = pbs_snakemake(user, "--profile", "profiles/casper", PBS_ACCOUNT=ACCOUNT)
    check_jobs(log, "casper", {f"{PREFIX}{k}": v for k, v in {
        "statistics": 1, "calibrate_render": 1, "process_shard": 2, "reduce_cells": 1,
        "concat_segments": 1, "preview": 1}.items()})
    assert "as PBS job array" in log
    # Another user's directory, a shard's script killed as the out-of-memory killer kills:
    # PBS reports the job failed, and it goes out again with more memory.
    from test_pbs import FAST, pbs_env

    user = deploy(tmp_path, sample_nc, "retried")
    log, killed = run_killing_a_shard_once(user, [*FAST, "--profile", "profiles/casper"],
                                           pbs_env(PBS_ACCOUNT=ACCOUNT))
    mems = shard_mems(log, killed)
    assert len(mems) == 2 and mems[1] > mems[0], mems
    assert count_rows(user / "results/demo/cells.copy") == ROWS
    assert count_rows(user / "results/demo/cells.copy") == ROWS
    assert frame_count(user / "results/demo/movie.mp4") == 240
    assert ("process_shard", "00001") in report_rows(user)
