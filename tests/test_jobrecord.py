"""Why a job failed, and what its retry is given: memory only after memory-like failures."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest
from conftest import ROOT
from ncreel.errors import JobInterrupted, NcreelError, ProgramKilled
from ncreel.jobrecord import failure_reason, read_attempts
from ncreel.resources import memory_attempt


def _attempts(*records):
    return [{"status": s, **({"reason": r} if r else {})} for s, r in records]


@pytest.mark.parametrize("exc, reason", [
    (MemoryError(), "memory"),
    (ProgramKilled("ffmpeg was killed by SIGKILL", signal.SIGKILL), "memory"),
    (ProgramKilled("ffmpeg was killed by SIGINT", signal.SIGINT), "interrupted"),
    (JobInterrupted(signal.SIGTERM), "interrupted"),
    (KeyboardInterrupt(), "interrupted"),
    (OSError(28, "No space left on device"), "disk"),
    (NcreelError("input 'a.nc': corrupt"), "data"),
    (ValueError("something else"), "error"),
])
def test_failure_reasons(exc, reason):
    assert failure_reason(exc) == reason


def test_memory_grows_only_after_memory_like_failures():
    assert memory_attempt([], 1) == 1
    # killed without an end line (memory kill) and an unclassified error: grow
    assert memory_attempt(_attempts(("killed", None)), 2) == 2
    assert memory_attempt(_attempts(("killed", None), ("failed", "error")), 3) == 3
    assert memory_attempt(_attempts(("failed", "memory")), 2) == 2
    # interrupted, bad input, full disk: the same memory again
    for reason in ("interrupted", "data", "disk"):
        assert memory_attempt(_attempts(("failed", reason)), 2) == 1
    assert memory_attempt(_attempts(("killed", None), ("failed", "interrupted")), 3) == 2
    # only this run's previous attempts count (older failures of the group are earlier runs)
    assert memory_attempt(_attempts(("killed", None), ("killed", None),
                                    ("failed", "data")), 2) == 1
    # an attempt that never wrote its start line (killed before the script ran) counts
    assert memory_attempt([], 2) == 2


_JOB = textwrap.dedent("""
    import sys, time
    sys.path.insert(0, {workflow!r})
    from ncreel.logs import configure
    from ncreel.jobrecord import record_attempt

    class Smk:
        log = [{log!r}]
        rule = "demo"
        wildcards = {{}}
        resources = {{"mem_mb": 100, "runtime": 5}}
        threads = 1

    configure(Smk.log[0])
    record_attempt(Smk)
    print("ready", flush=True)
    time.sleep(60)
""")


@pytest.mark.parametrize("inherited", ["default", "ignored"])
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP])
def test_a_signalled_job_says_one_line_and_records_why(tmp_path, sig, inherited):
    log = tmp_path / "job.log"
    code = _JOB.format(workflow=str(ROOT / "workflow"), log=str(log))

    def start():
        # A job of a run started in the background of a script inherits SIGINT ignored.
        if inherited == "ignored":
            signal.signal(signal.SIGINT, signal.SIG_IGN)

    with subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True, preexec_fn=start) as proc:
        assert proc.stdout.readline().strip() == "ready"
        t0 = time.monotonic()
        os.kill(proc.pid, sig)
        _, err = proc.communicate(timeout=30)
    assert time.monotonic() - t0 < 10
    assert proc.returncode != 0
    assert "Traceback" not in err, err
    lines = [ln for ln in err.splitlines() if "ncreel: job interrupted" in ln]
    assert len(lines) == 1 and signal.Signals(sig).name in lines[0], err
    ends = [json.loads(ln) for ln in (tmp_path / "job.log.attempts.jsonl").read_text()
            .splitlines() if '"end"' in ln]
    assert ends and ends[-1]["ok"] is False and ends[-1]["reason"] == "interrupted"
    assert read_attempts(tmp_path / "job.log.attempts.jsonl")[-1]["reason"] == "interrupted"


def test_ffmpeg_killed_by_a_signal_is_told_apart():
    from ncreel.render.movie import ffmpeg_error

    err = ffmpeg_error(-signal.SIGKILL, "writing seg.mp4", "")
    assert isinstance(err, ProgramKilled) and failure_reason(err) == "memory"
    assert "killed by SIGKILL writing seg.mp4 (out of memory?)" in str(err)
    assert failure_reason(ffmpeg_error(-signal.SIGINT, "writing seg.mp4", "")) == "interrupted"
    plain = ffmpeg_error(1, "writing seg.mp4", "Invalid argument")
    assert not isinstance(plain, ProgramKilled) and failure_reason(plain) == "data"
