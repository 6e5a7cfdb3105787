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


# ------------------------------------------------- attempt numbers: every way an attempt ends
_ATTEMPT = textwrap.dedent("""
    import os, signal, sys, time
    sys.path.insert(0, {workflow!r})
    from ncreel.jobrecord import record_attempt
    from ncreel.logs import configure

    class Smk:
        log = [{log!r}]
        rule = "process_shard"
        wildcards = {{}}
        resources = {resources!r}
        threads = 1

    configure(Smk.log[0])
    record_attempt(Smk)
    print("started", flush=True)
    if {how!r} == "fail":
        raise ValueError("bad")
    if {how!r} == "sigkill":
        os.kill(os.getpid(), signal.SIGKILL)
    if {how!r} == "wait":
        sys.stdin.readline()
        time.sleep(60)  # until the test's SIGTERM (a qdel) or end of input
""")


def _attempt(log, attempt, how="ok", wait=False):
    """One attempt's script as a real process, with Snakemake's `attempt` resource (None:
    a rule without it); ``how``: ``ok``, ``fail``, ``sigkill`` or ``wait`` (until told to
    end: returns the running process)."""
    resources = {"mem_mb": 100 * (attempt or 1), "runtime": 5}
    if attempt is not None:
        resources["attempt"] = attempt
    code = _ATTEMPT.format(workflow=str(ROOT / "workflow"), log=str(log),
                           resources=resources, how=how)
    proc = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "started"
    if how == "wait":
        return proc
    proc.communicate(timeout=30)
    return None


def _summary(log):
    return [(a["attempt"], a["status"], a.get("reason"))
            for a in read_attempts(log.parent / f"{log.name}.attempts.jsonl")]


def test_a_job_that_failed_after_its_script_is_not_attempt_1_again(tmp_path):
    """As on PBS: qdel of a sub-job right after its script's ``ok`` end line (its own
    Snakemake still checking outputs). Snakemake retries it as attempt 2; the record
    said ``attempt 1`` twice and read the first as the successful result."""
    from ncreel.jobrecord import attempt_count
    from ncreel.report.resourcepage import collect_jobs

    log = tmp_path / "00000.log"
    _attempt(log, 1)  # script ended ok, the job was deleted after it
    _attempt(log, 2)
    assert _summary(log) == [(1, "failed", "after_script"), (2, "ok", None)]
    assert attempt_count(read_attempts(tmp_path / "00000.log.attempts.jsonl")) == 2
    # its script's memory was enough: the retry does not ask for more
    assert memory_attempt(read_attempts(tmp_path / "00000.log.attempts.jsonl")[:1], 2) == 1
    row, = collect_jobs([{"rule": "process_shard", "job": "00000", "log": str(log)}])
    assert (row["attempts"], row["failed_attempts"]) == (2, 1)


def test_attempt_numbers_follow_snakemake_whatever_ended_the_last(tmp_path):
    log = tmp_path / "a.log"
    # attempt 1 deleted before its script started: no line at all
    _attempt(log, 2, "sigkill")  # the scheduler's memory kill: no end line
    _attempt(log, 3, "fail")
    _attempt(log, 4)
    assert _summary(log) == [(2, "killed", None), (3, "failed", "error"), (4, "ok", None)]
    from ncreel.jobrecord import attempt_count
    assert attempt_count(read_attempts(tmp_path / "a.log.attempts.jsonl")) == 4
    # a new run of the job starts again at 1; its first attempt failed, the rerun is 2
    _attempt(log, 1, "fail")
    _attempt(log, 1)  # a third run
    assert _summary(log) == [(1, "ok", None)]


def test_an_end_line_that_lands_after_the_retry_started(tmp_path):
    """A deleted job still unwinding (SIGTERM, clean-up) while its retry has started:
    its ``interrupted`` end line is its own, not the retry's, and says why."""
    log = tmp_path / "b.log"
    first = _attempt(log, 1, "wait")
    second = _attempt(log, 2, "wait")
    first.send_signal(signal.SIGTERM)
    first.communicate(timeout=30)
    assert _summary(log) == [(1, "failed", "interrupted"), (2, "running", None)]
    second.send_signal(signal.SIGKILL)
    second.communicate(timeout=30)
    _attempt(log, 3)
    assert _summary(log) == [(1, "failed", "interrupted"), (2, "killed", None),
                             (3, "ok", None)]


def test_a_rule_without_the_attempt_resource_is_counted(tmp_path):
    log = tmp_path / "c.log"
    _attempt(log, None, "fail")
    _attempt(log, None, "sigkill")
    _attempt(log, None)
    assert _summary(log) == [(1, "failed", "error"), (2, "killed", None), (3, "ok", None)]
    _attempt(log, None)
    assert _summary(log) == [(1, "ok", None)]


def test_every_rule_with_a_script_gives_it_snakemakes_attempt():
    import re

    for smk in (ROOT / "workflow/rules").glob("*.smk"):
        for block in re.split(r"(?m)^(?=rule |checkpoint )", smk.read_text()):
            if "scripts/" in block and block.startswith(("rule ", "checkpoint ")):
                assert "attempt=attempt_resource" in block, (smk.name, block.split(":")[0])
