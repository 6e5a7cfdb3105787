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
from ncreel.core.errors import JobInterrupted, NcreelError, ProgramKilled
from ncreel.run.jobrecord import failure_reason, read_attempts
from ncreel.run.resources import memory_attempt


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


def _wrapped(inner, how):
    outer = RuntimeError("Error calling __set_name__ on '_axis_method_wrapper' instance")
    setattr(outer, how, inner)
    return outer


@pytest.mark.parametrize("how", ["__cause__", "__context__"])
def test_a_signal_wrapped_in_another_error_is_an_interruption(how):
    """SIGTERM while an import creates a class surfaces as ``RuntimeError`` caused by the
    handler's JobInterrupted (seen killing a shard during ``import matplotlib``)."""
    from ncreel.run.jobrecord import failure_signal

    exc = _wrapped(JobInterrupted(signal.SIGTERM), how)
    assert failure_reason(exc) == "interrupted" and failure_signal(exc) == "SIGTERM"
    assert failure_signal(_wrapped(KeyboardInterrupt(), how)) == "SIGINT"
    assert failure_signal(ValueError("x")) is None
    assert failure_signal(ProgramKilled("ffmpeg was killed by SIGKILL", signal.SIGKILL)) is None


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
    from ncreel.run.logs import configure
    from ncreel.run.jobrecord import record_attempt

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
        # SIGHUP as a job outside nohup has it (a suite run under nohup passes it ignored,
        # which the job keeps on purpose: logs.stop_on_signals).
        signal.signal(signal.SIGHUP, signal.SIG_DFL)
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
    from ncreel.run.jobrecord import record_attempt
    from ncreel.run.logs import configure

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


def _attempt(log, attempt, how="ok", wait=False, runtime=5):
    """One attempt's script as a real process, with Snakemake's `attempt` resource (None:
    a rule without it); ``how``: ``ok``, ``fail``, ``sigkill`` or ``wait`` (until told to
    end: returns the running process); `runtime` in minutes."""
    resources = {"mem_mb": 100 * (attempt or 1), "runtime": runtime}
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
    from ncreel.report.resourcepage import collect_jobs
    from ncreel.run.jobrecord import attempt_count

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
    from ncreel.run.jobrecord import attempt_count
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


# ------------------------------------- an interrupted attempt is not run again (not walltime)
def _interrupted(sig="SIGTERM", *, used_s=30.0, runtime=5, deadline_in=None, attempt=1):
    """The record of an attempt stopped by `sig` after `used_s` seconds; `deadline_in`:
    seconds from its end to the scheduler's end time of the job (None: not known)."""
    start = 1_000_000.0
    rec = {"attempt": attempt, "status": "failed", "reason": "interrupted", "signal": sig,
           "start": start, "end": start + used_s, "runtime": runtime, "deadline": None}
    if deadline_in is not None:
        rec["deadline"] = start + used_s + deadline_in
    return rec


_STOP = ("ncreel: error: process_shard shard=00001: not run again: its attempt 1 was "
         "stopped by SIGTERM (scancel, kill or qdel); run the same command again to redo it")


@pytest.mark.parametrize("previous, attempt, runs", [
    (None, 1, True),                                     # a new run always works
    (_interrupted(), 1, True),
    (None, 2, True),                                     # attempt 1 left no record
    ({"attempt": 1, "status": "killed"}, 2, True),      # memory kill: no end line
    ({"attempt": 1, "status": "failed", "reason": "memory"}, 2, True),
    ({"attempt": 1, "status": "failed", "reason": "data"}, 2, True),
    (_interrupted(), 2, False),                          # kill -TERM, scancel at 10 %
    (_interrupted("SIGINT"), 2, False),
    (_interrupted("SIGHUP"), 2, False),
    (_interrupted(used_s=280), 2, True),                 # 93 % of 5 min: walltime
    (_interrupted(used_s=260), 2, False),                # 87 %
    (_interrupted(used_s=30, deadline_in=5), 2, True),   # at the scheduler's end time
    (_interrupted(used_s=280, deadline_in=600), 2, False),  # the end time says: not walltime
    (_interrupted(None), 2, True),                       # no signal name: cannot tell
    ({**_interrupted(), "end": None}, 2, True),
    ({**_interrupted(), "runtime": None}, 2, True),      # no runtime: cannot tell
])
def test_retry_verdict(previous, attempt, runs):
    from ncreel.run.jobrecord import retry_verdict

    ok, line = retry_verdict(previous, attempt, rule="process_shard",
                             wildcards="shard=00001", environ={})
    assert ok is runs
    if not ok:
        assert line == _STOP.replace("SIGTERM", previous["signal"])
    elif previous and previous.get("reason") == "interrupted" and attempt > 1:
        assert line.startswith("ncreel: note: process_shard shard=00001: its attempt 1 ")
        assert line.endswith("so it runs again")
    else:
        assert line is None


def test_retry_verdict_after_a_refusal_and_under_the_pbs_pro_executor():
    from ncreel.run.jobrecord import retry_verdict

    refused = {"attempt": 2, "status": "failed", "reason": "not_retried",
               "stopped_attempt": 1, "signal": "SIGTERM", "message": _STOP}
    assert retry_verdict(refused, 3, rule="process_shard", wildcards="shard=00001",
                         environ={}) == (False, _STOP)
    # The pbs-pro executor decides itself (it refuses a deleted job before qsub).
    env = {"SNAKEMAKE_PBS_PRO_JOB_OVERHEAD_MB": "300"}
    assert retry_verdict(_interrupted(), 2, environ=env) == (True, None)


def test_scheduler_deadline_from_slurm():
    from ncreel.run.jobrecord import scheduler_deadline

    assert scheduler_deadline({}) is None  # not in a Slurm job
    assert scheduler_deadline({"SLURM_JOB_ID": "7", "SLURM_JOB_END_TIME": "1790000000"}) \
        == 1790000000.0


def test_an_interrupted_attempt_is_not_run_again_but_a_new_run_is(tmp_path):
    """Real attempts: attempt 1 stopped by SIGTERM after a second; attempts 2 and 3 of the
    same run refuse at once with the one line (their scripts do no work); the same
    command again (attempt 1) runs."""
    log = tmp_path / "00001.log"
    first = _attempt(log, 1, "wait")
    first.send_signal(signal.SIGTERM)
    first.communicate(timeout=30)
    for attempt in (2, 3):
        proc = _refused(log, attempt)
        assert proc.returncode == 1
        assert proc.stderr.strip().splitlines() == [
            _STOP.replace("process_shard shard=00001", "process_shard")], proc.stderr
        assert "started" not in proc.stdout
    assert _summary(log) == [(1, "failed", "interrupted"), (2, "failed", "not_retried"),
                             (3, "failed", "not_retried")]
    assert log.read_text().strip().endswith(_STOP.replace(" shard=00001", ""))
    # refusals are no memory failures: a 4th attempt would keep attempt 1's memory
    assert memory_attempt(read_attempts(tmp_path / "00001.log.attempts.jsonl"), 4) == 1
    _attempt(log, 1)
    assert _summary(log) == [(1, "ok", None)]


def test_an_attempt_interrupted_near_its_runtime_is_run_again(tmp_path):
    """The walltime's SIGTERM (here: after 93 % of a 1.2 s runtime) stays retriable."""
    log = tmp_path / "00002.log"
    first = _attempt(log, 1, "wait", runtime=0.02)
    time.sleep(1.15)
    first.send_signal(signal.SIGTERM)
    first.communicate(timeout=30)
    _attempt(log, 2, runtime=0.02)
    assert _summary(log) == [(1, "failed", "interrupted"), (2, "ok", None)]
    assert "taken as a walltime kill, so it runs again" in log.read_text()


def _refused(log, attempt):
    code = _ATTEMPT.format(workflow=str(ROOT / "workflow"), log=str(log), how="ok",
                           resources={"mem_mb": 100, "runtime": 5, "attempt": attempt})
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60)


def test_a_job_that_stops_on_purpose_says_why_in_its_log_too(tmp_path):
    """Snakemake points at the job's log file: the one line is there, and once on stderr."""
    log = tmp_path / "logs" / "load_database.log"
    code = ("import sys; sys.path.insert(0, sys.argv[1]); "
            "from ncreel.run.logs import configure; "
            "from ncreel.run.jobrecord import exit_failed; configure(sys.argv[2]); "
            "exit_failed('ncreel: error: database \"nosuchdb\" does not exist')")
    proc = subprocess.run([sys.executable, "-c", code, str(ROOT / "workflow"), str(log)],
                          capture_output=True, text=True, timeout=60)
    line = 'ncreel: error: database "nosuchdb" does not exist'
    assert proc.returncode == 1 and proc.stderr == line + "\n"
    assert log.read_text().rstrip("\n").endswith(f"ERROR ncreel: {line}")
