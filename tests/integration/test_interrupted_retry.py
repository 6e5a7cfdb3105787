"""A shard job stopped by a signal is not run again by Snakemake's ``retries``; a walltime
kill is.

The shard's first attempt is kept running by a ``decorate`` function that sleeps while
the run's shard logs hold one attempt (the test's own module, written into the working
directory), so it can be stopped for sure while its script runs; later attempts draw at
once. Locally the shard's script process (its pid is in its attempts record) gets
SIGTERM, as ``kill -TERM`` does; with cluster-generic the same happens inside a job
script run by ``/bin/sh``; on a real Slurm (marker ``slurm``) the job is ``scancel``-ed,
or killed by Slurm at its one-minute time limit.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from test_slurm import FAST_POLL, SLURM_ENV, env, sacct, slurm, workdir  # noqa: F401
from workflow_run import SMALL

pytestmark = [pytest.mark.integration]

SHARD = "00001"
ATTEMPTS = Path(f"logs/demo/process_shard/{SHARD}.log.attempts.jsonl")
TARGET = f"results/demo/cells/{SHARD}.copy"

#: Sleeps in the first attempt of any shard of the run (one start line in all), in the
#: shard's script only (Snakemake names it ``tmp....process_shard.py``): not in the check
#: of the function when a Snakemake reads the workflow, nor in calibrate_render.
SLOW_ONCE = '''
import glob, sys, time


def slow_once(fig, ax, info):
    starts = sum(open(p).read().count('"event": "start"')
                 for p in glob.glob("logs/*/process_shard/*.attempts.jsonl"))
    if starts == 1 and sys.argv[0].endswith("process_shard.py"):
        time.sleep({seconds})
'''

CONFIG = ["--config", *SMALL, "frames_per_shard=60", "decorate=slow_once:slow_once"]

#: Job scripts run by /bin/sh, as a batch system runs them (cluster-generic, whose jobs
#: run while "submitted"; the controller is then not the job's parent).
SH_EXECUTOR = ["--executor", "cluster-generic", "--cluster-generic-submit-cmd", "sh",
               "--seconds-between-status-checks", "1", "--latency-wait", "1"]


def _work(tmp_path_factory, sample_nc, name, seconds):
    work = workdir(tmp_path_factory, sample_nc, name)
    (work / "slow_once.py").write_text(SLOW_ONCE.format(seconds=seconds))
    return work


def _records(work):
    path = work / ATTEMPTS
    if not path.exists():
        return []
    return [json.loads(ln) for ln in path.read_text().splitlines() if ln.strip()]


def _wait_for_start(work, proc, timeout=600):
    """The first attempt's start line, once its script runs."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        starts = [r for r in _records(work) if r["event"] == "start"]
        if starts:
            return starts[0]
        assert proc.poll() is None, "snakemake ended before the shard started"
        time.sleep(0.2)
    raise AssertionError("the shard never started")


def _summary(work):
    from ncreel.run.jobrecord import read_attempts

    return [(a["attempt"], a["status"], a.get("reason"), a.get("signal"))
            for a in read_attempts(work / ATTEMPTS)]


def _stop_line(sig="SIGTERM"):
    return (f"ncreel: error: process_shard shard={SHARD}: not run again: its attempt 1 was "
            f"stopped by {sig} (scancel, kill or qdel); run the same command again to redo it")


def _start(work, *args, **envs):
    return subprocess.Popen([sys.executable, "-m", "snakemake", *args], cwd=work,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env=env(**envs))


@pytest.mark.parametrize("executor", [["--cores", "2"], ["-j", "1", *SH_EXECUTOR]],
                         ids=["local", "cluster-generic"])
def test_a_shard_killed_by_sigterm_is_not_run_again(executor, tmp_path_factory, sample_nc):
    """``kill -TERM`` of a running shard's script: its next attempts (``--retries 2``) do
    no work and say one line; the run ends non-zero; the same command then redoes it."""
    work = _work(tmp_path_factory, sample_nc, "retry_kill", seconds=120)
    args = [*executor, "--retries", "2", *CONFIG, "--", TARGET]
    with _start(work, *args) as proc:
        first = _wait_for_start(work, proc)
        time.sleep(1)  # into its script's work (the sleeping decorate)
        os.kill(first["pid"], signal.SIGTERM)
        out, _ = proc.communicate(timeout=600)
    (work / "snakemake.out").write_text(out)
    assert proc.returncode != 0, out[-3000:]
    assert _summary(work) == [(1, "failed", "interrupted", "SIGTERM"),
                              (2, "failed", "not_retried", "SIGTERM"),
                              (3, "failed", "not_retried", "SIGTERM")]
    lines = out.splitlines()
    assert _stop_line() in lines, out[-3000:]
    assert "Traceback" not in out
    assert not (work / TARGET).exists()
    # The same command again is a new run: attempt 1 redoes the shard (and draws at once).
    again = subprocess.run([sys.executable, "-m", "snakemake", *args], cwd=work, env=env(),
                           capture_output=True, text=True, timeout=600)
    assert again.returncode == 0, (again.stdout + again.stderr)[-3000:]
    assert _summary(work) == [(1, "ok", None, None)]
    assert (work / TARGET).stat().st_size > 0


@pytest.mark.slurm
def test_a_shard_cancelled_with_scancel_is_not_resubmitted(slurm, tmp_path_factory,  # noqa: F811
                                                           sample_nc):
    """``scancel`` of a running shard job on Slurm: Snakemake sees it fail (sacct's
    ``CANCELLED by <uid>``, see ncreel.cluster.slurm.see_cancelled_jobs) and resubmits it;
    the new attempts do no work: one line in the controller's output, the run ends
    non-zero, the shard's script ran once."""
    work = _work(tmp_path_factory, sample_nc, "retry_scancel", seconds=240)
    args = [*FAST_POLL, "--profile", "profiles/slurm", *CONFIG, "--", TARGET]
    with _start(work, *args, **SLURM_ENV) as proc:
        first = _wait_for_start(work, proc)
        assert first["scheduler"] == "slurm" and first["deadline"] is not None, first
        time.sleep(2)
        subprocess.run(["scancel", first["jobid"]], check=True)
        out, _ = proc.communicate(timeout=600)
    (work / "snakemake.out").write_text(out)
    assert proc.returncode != 0, out[-3000:]
    summary = _summary(work)
    assert summary[0] == (1, "failed", "interrupted", "SIGTERM"), summary
    assert summary[1:] and all(s[1:] == ("failed", "not_retried", "SIGTERM")
                               for s in summary[1:]), summary
    assert _stop_line() in out.splitlines(), out[-3000:]
    assert "Traceback" not in out
    assert not (work / TARGET).exists()


@pytest.mark.slurm
def test_a_shard_killed_at_its_time_limit_is_resubmitted(slurm, tmp_path_factory,  # noqa: F811
                                                         sample_nc):
    """A shard whose one-minute ``runtime`` runs out: Slurm's SIGTERM at the time limit
    (TIMEOUT in sacct) is a walltime kill, so the next attempt runs and succeeds."""
    work = _work(tmp_path_factory, sample_nc, "retry_walltime", seconds=400)
    since = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(time.time() - 2))
    args = [*FAST_POLL, "--profile", "profiles/slurm", *CONFIG,
            "--set-resources", "process_shard:runtime=1", "--", TARGET]
    proc = subprocess.run([sys.executable, "-m", "snakemake", *args], cwd=work,
                          env=env(**SLURM_ENV), capture_output=True, text=True, timeout=900)
    out = proc.stdout + proc.stderr
    (work / "snakemake.out").write_text(out)
    assert proc.returncode == 0, out[-3000:]
    assert _summary(work) == [(1, "failed", "interrupted", "SIGTERM"), (2, "ok", None, None)]
    first = _records(work)[0]
    assert first["scheduler"] == "slurm" and first["deadline"] > first["start"], first
    assert "a walltime kill, so it runs again" in (work / "logs/demo/process_shard"
                                                   / f"{SHARD}.log").read_text()
    states = [r["State"] for r in sacct(work, since) if r["JobName"] != "allocation"]
    assert "TIMEOUT" in states, states
    assert (work / TARGET).stat().st_size > 0
