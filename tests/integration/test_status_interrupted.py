"""`make status` after the controlling Snakemake is gone: an SSH drop (SIGHUP) mid-run.

A real small run (two shards) is started in its own session, as a login shell starts it;
once the first shard renders, the whole process group gets SIGHUP, as when the terminal
closes. With no process left, the status must say *interrupted*, never *running* (a shard
that ended well just before the signal says *done*); running
the same command again finishes the run and the status then says *complete*.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time

import pytest
from conftest import ROOT
from workflow_run import SMALL, make_workdir

CONFIG = [*SMALL, "frames_per_shard=120", "calibration_frames=16"]


def _status(work) -> str:
    return subprocess.run([sys.executable, "-m", "ncreel.cluster.runstatus"], cwd=work,
                          check=True, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(ROOT / "workflow")}).stdout


@pytest.mark.integration
def test_sighup_mid_run_reads_interrupted_then_resume_completes(tmp_path, sample_nc):
    work = make_workdir(tmp_path)
    (work / "resources").mkdir()
    shutil.copy(sample_nc, work / "resources" / "A1B_north_america.nc")
    cmd = [sys.executable, "-m", "snakemake", "--cores", "2", "--config", *CONFIG]
    record = work / "logs/demo/process_shard/00000.log.attempts.jsonl"
    job_log = work / "logs/demo/process_shard/00000.log"
    # SIGHUP at its default, as a login shell has it (whatever this test inherited, e.g.
    # from nohup, under which a run is meant to outlive the hangup).
    with subprocess.Popen(cmd, cwd=work, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                          start_new_session=True,
                          preexec_fn=lambda: signal.signal(signal.SIGHUP, signal.SIG_DFL)
                          ) as proc:
        try:
            deadline = time.monotonic() + 240
            while not (record.is_file() and job_log.is_file()
                       and "frames (" in job_log.read_text()):
                assert time.monotonic() < deadline and proc.poll() is None, "no shard rendered"
                time.sleep(0.1)
            job_pid = json.loads(record.read_text().splitlines()[0])["pid"]
            os.killpg(proc.pid, signal.SIGHUP)  # the terminal closed
            proc.wait(timeout=120)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
    deadline = time.monotonic() + 30
    while _alive(job_pid):  # the job went with its session
        assert time.monotonic() < deadline, f"job {job_pid} outlived the SIGHUP"
        time.sleep(0.1)
    out = _status(work)
    rows = {line.split()[0]: line for line in out.splitlines() if line[:1].isdigit()}
    assert rows and not any(" running " in line for line in rows.values()), out
    # A shard's job may have ended well just before the signal reached it (small frames
    # draw fast): then it reads done, truthfully; every other shard reads interrupted.
    ended_ok = {name for name in rows if _ended_ok(work, name)}
    assert all("done" in rows[name] for name in ended_ok), out
    assert all("interrupted" in rows[name] for name in rows if name not in ended_ok), out
    assert len(ended_ok) < len(rows), out
    assert "run demo: interrupted (no process holds results/demo/.ncreel-run.lock)" in out
    done = subprocess.run(cmd, cwd=work, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    out = _status(work)
    assert "2 shards: 2 done, 0 running, 0 failed, 0 interrupted, 0 to do" in out
    assert "run demo: complete" in out


def _ended_ok(work, shard: str) -> bool:
    """Whether the shard's last attempt recorded a good end."""
    record = work / f"logs/demo/process_shard/{shard}.log.attempts.jsonl"
    if not record.is_file():
        return False
    ends = [json.loads(line) for line in record.read_text().splitlines()
            if '"event": "end"' in line]
    return bool(ends) and ends[-1].get("ok") is True


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True
