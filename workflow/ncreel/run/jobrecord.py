"""Each job's record of what it declared, one line per attempt, next to its log.

Snakemake deletes a job's log and overwrites its ``benchmark:`` file on every attempt, and
its metadata (``.snakemake/metadata``) keeps neither resources nor attempts. So every job
appends to ``<log>.attempts.jsonl`` (which Snakemake does not touch) a ``start`` line with
Snakemake's attempt number and the resources it runs under (``mem_mb``, ``runtime``,
``threads``, as Snakemake evaluated them for this attempt), the host and the scheduler's
job id, and an ``end`` line when its script finishes (``ok`` false on an exception).

The attempt number is Snakemake's own (the rule's ``attempt`` resource,
:data:`ATTEMPT_RESOURCE`), not a count of the lines: an attempt can end without a
proper ``end`` line in several ways, and counting lines then numbers the next attempt
wrong. Killed before its script started (a queued or starting job deleted, a node
lost): no line at all. Killed while its script ran (the scheduler's memory kill,
SIGKILL): no ``end`` line. Killed or failed after its script ended (``qdel`` or the
walltime while the job's own Snakemake checks the outputs): an ``end`` line that says
``ok`` although Snakemake saw the job fail. Interrupted while a retry already started:
its ``end`` line lands after the next attempt's ``start`` line.

An attempt stopped by SIGINT, SIGTERM or SIGHUP (Ctrl-C, ``scancel``, ``kill``, ``qdel``)
was meant to stop: Snakemake's ``retries`` would run it again all the same, so the next
attempt of the same run does no work (:func:`retry_verdict`), unless the signal was the
scheduler's walltime kill, which a longer ``runtime`` may cure.

A job's attempts in one Snakemake run have increasing numbers; a ``start`` line whose
number is not above the one before begins a new run. The ``start`` lines of the newest
run are the attempts of the current result; older groups belong to earlier runs.
"""

from __future__ import annotations

import atexit
import json
import logging
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import NoReturn

#: Set when this job's script has failed (uncaught exception or :func:`exit_failed`):
#: why, one of :data:`FAILURE_REASONS`.
_FAILED: list[str] = []
#: The one line said for a failure that names its cause (a full disk), for the record.
_MESSAGE: list[str] = []
#: The name of the signal that stopped this job's script (``SIGTERM``...), if one did.
_SIGNAL: list[str] = []

#: Why an attempt failed, in its ``end`` line: ``memory`` (MemoryError), ``interrupted``
#: (SIGINT, SIGTERM, SIGHUP: a user, a logout or the scheduler's walltime), ``data`` (bad
#: input, :class:`ncreel.core.errors.NcreelError`), ``disk`` (disk full or quota), ``error``
#: (anything else). An attempt killed outright (the scheduler's memory kill, SIGKILL) has
#: no ``end`` line: :func:`read_attempts` calls it ``killed``. An attempt whose script
#: ended ``ok`` but that Snakemake retried (its job failed after the script: deleted,
#: walltime, outputs missing) is read as failed with reason ``after_script``. An attempt
#: that refused to run because the attempt before it was interrupted or met a full disk
#: (:func:`retry_verdict`) ends with ``not_retried``.
FAILURE_REASONS = ("memory", "interrupted", "data", "disk", "error", "after_script",
                   "not_retried")

#: Signals that mean "stop" (a user's Ctrl-C, ``kill``, ``scancel``, ``qdel``, a logout),
#: unless they came at the walltime.
STOP_SIGNAL_NAMES = ("SIGINT", "SIGTERM", "SIGHUP")

#: An interrupted attempt whose elapsed time had reached this fraction of its declared
#: ``runtime`` is taken as killed at its walltime, and retried.
WALLTIME_FRACTION = 0.9

#: Seconds before the scheduler's end time of the job from which a signal is taken as its
#: walltime kill (at least; 5 % of the runtime when that is more): schedulers signal at
#: or after the limit, the margin covers clocks and the job's own start-up.
WALLTIME_MARGIN_S = 15

#: The resource through which a rule gives its script Snakemake's attempt number
#: (``attempt=attempt_resource`` in the rule's ``resources:``, rules/common.smk):
#: Snakemake passes a script its resources but not its attempt. Inside a scheduler job,
#: the job's own Snakemake evaluates it from its ``--attempt``.
ATTEMPT_RESOURCE = "attempt"


def failure_reason(exc: BaseException) -> str:
    """Classify an exception that ended a job into one of :data:`FAILURE_REASONS`."""
    import signal

    from ncreel.core.errors import JobInterrupted, NcreelError, ProgramKilled, disk_full

    if interruption(exc) is not None:
        return "interrupted"
    if isinstance(exc, MemoryError):
        return "memory"
    if isinstance(exc, ProgramKilled):
        return "memory" if exc.signum == signal.SIGKILL else "interrupted"
    if isinstance(exc, JobInterrupted | KeyboardInterrupt):
        return "interrupted"
    if disk_full(exc) is not None:  # whichever writer met it (ncreel.core.errors)
        return "disk"
    if isinstance(exc, NcreelError):
        return "data"
    return "error"


def interruption(exc: BaseException) -> BaseException | None:
    """Return the :class:`ncreel.core.errors.JobInterrupted` or :class:`KeyboardInterrupt` in `exc`.

    A signal's exception can surface wrapped: raised while Python creates a class (an
    import under way), it becomes the ``__cause__`` of a ``RuntimeError("Error calling
    __set_name__ ...")``; raised in a ``finally`` or ``except`` block, the ``__context__``
    of what that block raised. Follows both chains (at most 20 links).

    Returns
    -------
    BaseException or None
        The interruption, or None if there is none in the chain.
    """
    from ncreel.core.errors import JobInterrupted

    seen = 0
    todo = [exc]
    while todo and seen < 20:
        e = todo.pop(0)
        seen += 1
        if isinstance(e, JobInterrupted | KeyboardInterrupt):
            return e
        todo.extend(x for x in (e.__cause__, e.__context__) if x is not None)
    return None


def failure_signal(exc: BaseException) -> str | None:
    """Name of the stop signal (:data:`STOP_SIGNAL_NAMES`) that ended a job, or None.

    :class:`ncreel.core.errors.JobInterrupted` (the job's own handler),
    :class:`KeyboardInterrupt` (SIGINT) and :class:`ncreel.core.errors.ProgramKilled` (its
    ffmpeg killed by the signal sent to the job's process group).
    """
    import signal

    from ncreel.core.errors import JobInterrupted, ProgramKilled

    exc = interruption(exc) or exc
    if isinstance(exc, KeyboardInterrupt):
        return "SIGINT"
    if isinstance(exc, JobInterrupted | ProgramKilled):
        try:
            name = signal.Signals(exc.signum).name
        except ValueError:
            return None
        return name if name in STOP_SIGNAL_NAMES else None
    return None


#: Environment variables holding the scheduler's job id, by scheduler.
JOB_ID_VARIABLES = (("slurm", "SLURM_JOB_ID"), ("pbs", "PBS_JOBID"))


def attempts_path(log_file: str | os.PathLike) -> Path:
    """Return the attempts record kept next to a job's ``log:`` file."""
    return Path(f"{log_file}.attempts.jsonl")


def scheduler_job_id() -> tuple[str | None, str | None]:
    """``(scheduler, job id)`` of the batch job this process runs in, or ``(None, None)``."""
    for name, var in JOB_ID_VARIABLES:
        if os.environ.get(var):
            return name, os.environ[var]
    return None, None


def read_attempts(path: str | os.PathLike) -> list[dict]:
    """Read the attempts of the current result of one job, oldest first.

    Parameters
    ----------
    path : path
        A ``<log>.attempts.jsonl`` file.

    Returns
    -------
    list of dict
        One dict per ``start`` line of the newest run of the job (see the module
        docstring): the start line's fields (``attempt``, Snakemake's attempt number;
        ``mem_mb``, ``runtime`` in minutes, ``threads``, ``start`` epoch seconds,
        ``host``, ``scheduler``, ``jobid``) plus ``status``: ``ok``, ``failed`` (script
        raised, or ended ok and was retried all the same), ``killed`` (no end line and a
        later attempt exists) or ``running`` (no end line yet, the newest attempt), and
        for a failed attempt ``reason`` (one of :data:`FAILURE_REASONS`), ``end`` (epoch
        seconds) and, when a signal stopped it, ``signal`` (``SIGTERM``...); a
        ``not_retried`` attempt also has ``stopped_attempt`` and ``message``. Empty if
        the file does not exist.
    """
    try:
        lines = Path(path).read_text().splitlines()
    except FileNotFoundError:
        return []
    groups: list[list[dict]] = [[]]
    for line in lines:
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:
            continue  # a line cut short by a kill
        if not isinstance(rec, dict):
            continue
        if rec.get("event") == "start":
            if groups[-1] and _new_run(groups[-1][-1], rec):
                groups.append([])
            groups[-1].append({**rec, "status": "running"})
        elif rec.get("event") == "end":
            # An interrupted attempt's end line may land after its retry's start line.
            owner = next((a for group in reversed(groups) for a in reversed(group)
                          if _same_process(a, rec)), None)
            if owner is not None:
                owner["status"] = "ok" if rec.get("ok") else "failed"
                owner["end"] = rec.get("end")
                if not rec.get("ok"):
                    owner["reason"] = rec.get("reason", "error")
                    for key in ("signal", "stopped_attempt", "message"):
                        if key in rec:
                            owner[key] = rec[key]
    attempts = groups[-1]
    for a in attempts[:-1]:
        if a["status"] == "running":
            a["status"] = "killed"
        elif a["status"] == "ok":
            # Its script ended well but Snakemake ran the job again: the job failed
            # after the script (deleted, walltime, outputs missing).
            a["status"], a["reason"] = "failed", "after_script"
    return attempts


def attempt_count(attempts: list[dict]) -> int:
    """Return how many attempts the current result took: the newest attempt's number.

    Parameters
    ----------
    attempts : list of dict
        :func:`read_attempts` of one job.

    Returns
    -------
    int
        Snakemake's attempt number of the newest attempt, or the number of recorded
        attempts if larger (records without numbers); 0 if there are none. Attempts
        killed before their script started have no line but are counted.
    """
    if not attempts:
        return 0
    number = attempts[-1].get("attempt")
    return max(len(attempts), number if isinstance(number, int) else 0)


def _new_run(last: dict, start: dict) -> bool:
    """Whether `start` begins a new run of the job rather than retrying `last`."""
    a, b = last.get("attempt"), start.get("attempt")
    if isinstance(a, int) and isinstance(b, int):
        return b <= a
    return last.get("status") == "ok"


def _same_process(attempt: dict, end: dict) -> bool:
    """Whether `end` is the end line of `attempt` (the process's pid, host and number)."""
    if attempt.get("status") != "running" or attempt.get("pid") != end.get("pid"):
        return False
    return all(end.get(k) is None or attempt.get(k) == end.get(k) for k in ("host", "attempt"))


def scheduler_deadline(environ=None, run=subprocess.run) -> float | None:
    """When the scheduler will stop this job for its walltime (epoch seconds), if it says.

    Slurm 23.02 and later set ``$SLURM_JOB_END_TIME``; older Slurm (22.05 has neither it
    nor ``$SLURM_JOB_START_TIME``) is asked once with ``squeue -h -j ID -o %e``. Other
    schedulers, local runs, a job without a time limit and any failure: None.

    Parameters
    ----------
    environ : mapping, optional
        Environment to read (default: ``os.environ``).
    run : callable
        ``subprocess.run`` (the command is an argument list).

    Returns
    -------
    float or None
    """
    env = os.environ if environ is None else environ
    jobid = env.get("SLURM_JOB_ID")
    if not jobid:
        return None
    given = env.get("SLURM_JOB_END_TIME", "")
    if given.isdigit():
        return float(given)
    try:
        proc = run(["squeue", "-h", "-j", jobid, "-o", "%e"], capture_output=True,
                   text=True, timeout=10)
        text = proc.stdout.strip()
        # Local time, as Slurm prints it; "Unknown"/"N/A" for a job without a limit.
        return time.mktime(time.strptime(text, "%Y-%m-%dT%H:%M:%S")) \
            if proc.returncode == 0 else None
    except (OSError, ValueError, subprocess.SubprocessError):
        return None


#: Set by the ``pbs-pro`` executor in its jobs (see :mod:`ncreel.run.resources`): that executor
#: itself refuses to resubmit a job deleted with ``qdel`` and resubmits a walltime kill,
#: so an attempt it started is meant to run.
PBS_PRO_EXECUTOR_ENV = "SNAKEMAKE_PBS_PRO_JOB_OVERHEAD_MB"


def retry_verdict(previous: dict | None, attempt: int, *, rule: str = "job",
                  wildcards: str = "", environ=None) -> tuple[bool, str | None]:
    """Whether Snakemake's attempt `attempt` of a job runs, from the record of the one before.

    An attempt stopped by a stop signal (:data:`STOP_SIGNAL_NAMES`: Ctrl-C, ``kill``,
    ``scancel``, ``qdel``, a logout) was meant to stop, so the next attempt does no work;
    nor does any attempt after one that refused. A walltime kill (also SIGTERM) stays
    retriable: the job cannot see why it was signalled, so the signal is taken as the
    walltime when it came at most ``max(WALLTIME_MARGIN_S, 5 % of runtime)`` before the
    scheduler's end time of the job (``deadline`` in its start line, see
    :func:`scheduler_deadline`), or, without one, once the attempt had run
    :data:`WALLTIME_FRACTION` of its declared ``runtime``. When it cannot tell (no end
    time, no signal name, no runtime), the job runs and says so. An attempt that met a
    full disk (reason ``disk``) is not run again either: the disk would fill again at
    once; the line says so with the full disk's own line. Under the ``pbs-pro``
    executor (:data:`PBS_PRO_EXECUTOR_ENV` set), which refuses to resubmit a deleted job
    itself, every attempt it submits runs.

    Parameters
    ----------
    previous : dict or None
        The record of attempt ``attempt - 1`` (:func:`read_attempts`), or None if it left
        none (killed before its script started) or `attempt` is 1.
    attempt : int
        Snakemake's attempt number of the attempt about to run.
    rule, wildcards : str
        The job's rule and wildcards (``shard=00001``), for the message.
    environ : mapping, optional
        Environment to read (default: ``os.environ``).

    Returns
    -------
    (bool, str or None)
        True and an optional note line (``ncreel: note: ...``) when the attempt runs;
        False and the one ``ncreel: error: ...`` line when it does not.
    """
    env = os.environ if environ is None else environ
    if attempt <= 1 or not previous or previous.get("status") != "failed":
        return True, None
    what = f"{rule} {wildcards}".strip()
    reason = previous.get("reason")
    if reason == "not_retried":
        line = previous.get("message")
        return False, line if isinstance(line, str) and line else _stop_line(
            what, previous.get("stopped_attempt"), previous.get("signal"))
    if reason == "disk":
        # The disk is still full, or nearly: a retry would fill it again at once.
        said = previous.get("message")
        return False, (f"ncreel: error: {what}: not run again: its attempt "
                       f"{previous.get('attempt', attempt - 1)} stopped on a full disk"
                       + (f" ({said})" if isinstance(said, str) and said else
                          ": free space, or make the run smaller, then run the same "
                          "command again"))
    if reason != "interrupted" or env.get(PBS_PRO_EXECUTOR_ENV):
        return True, None
    number, sig = previous.get("attempt", attempt - 1), previous.get("signal")
    end, start = _number(previous.get("end")), _number(previous.get("start"))
    runtime, deadline = _number(previous.get("runtime")), _number(previous.get("deadline"))
    unsure = (f"ncreel: note: {what}: its attempt {number} was interrupted"
              f"{f' by {sig}' if sig else ''}; ")
    if sig not in STOP_SIGNAL_NAMES or end is None:
        return True, unsure + "it cannot tell whether by its walltime, so it runs again"
    if deadline is not None:
        margin = max(WALLTIME_MARGIN_S, 0.05 * 60 * runtime) if runtime else WALLTIME_MARGIN_S
        if end >= deadline - margin:
            when = "before" if deadline >= end else "after"
            return True, (unsure + f"{abs(deadline - end):.0f} s {when} the scheduler's end "
                          "time of the job: a walltime kill, so it runs again")
        return False, _stop_line(what, number, sig)
    if runtime is None or start is None or runtime <= 0:
        return True, unsure + "it cannot tell whether by its walltime, so it runs again"
    used = (end - start) / (60 * runtime)
    if used >= WALLTIME_FRACTION:
        return True, (unsure + f"after {used:.0%} of its runtime ({runtime:g} min): taken "
                      "as a walltime kill, so it runs again")
    return False, _stop_line(what, number, sig)


def _stop_line(what: str, number, sig) -> str:
    return (f"ncreel: error: {what}: not run again: its attempt {number} was stopped by "
            f"{sig or 'a signal'} (scancel, kill or qdel); run the same command again to "
            "redo it")


def refused_lines(attempt_files, since: float) -> list[str]:
    """Return the ``not run again`` lines of jobs whose newest attempt refused after `since`.

    For the controller of a run whose jobs ran elsewhere (a scheduler), where a job's
    stderr reaches only its log: one line per such job.

    Parameters
    ----------
    attempt_files : iterable of path
        ``<log>.attempts.jsonl`` files.
    since : float
        Epoch seconds; attempts that started before are an earlier run's.

    Returns
    -------
    list of str
    """
    lines = []
    for path in sorted(attempt_files):
        attempts = read_attempts(path)
        last = attempts[-1] if attempts else {}
        if last.get("reason") == "not_retried" and (_number(last.get("start")) or 0) >= since \
                and isinstance(last.get("message"), str):
            lines.append(last["message"])
    return lines


def snakemake_attempt(resources) -> int | None:
    """Return Snakemake's attempt number from a job's resources, or None if not given.

    Parameters
    ----------
    resources : mapping
        ``snakemake.resources`` of a rule's script; the rule declares
        :data:`ATTEMPT_RESOURCE`.
    """
    value = resources.get(ATTEMPT_RESOURCE)
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 1 \
        else None


def record_attempt(smk) -> None:
    """Append this attempt's ``start`` line and arrange its ``end`` line.

    Parameters
    ----------
    smk : snakemake.script.Snakemake
        The ``snakemake`` object of a rule's script (``log[0]``, ``rule``, ``wildcards``,
        ``resources``, ``threads``). The attempt number is the rule's
        :data:`ATTEMPT_RESOURCE`; a rule without it gets one counted from the record
        (1 after a successful attempt, else one more than the attempts since).

    Raises
    ------
    SystemExit
        With the one ``ncreel: error: ... not run again ...`` line (also appended to the
        log, and recorded as ``not_retried``) when :func:`retry_verdict` says this
        attempt must not run: the one before it was stopped by a signal that was not its
        walltime. A note that it runs when it could not tell goes to the log.
    """
    if not smk.log:
        return
    path = attempts_path(smk.log[0])
    path.parent.mkdir(parents=True, exist_ok=True)
    res = smk.resources
    attempt = snakemake_attempt(res)
    previous = read_attempts(path)
    if attempt is None:
        attempt = 1 if not previous or previous[-1]["status"] == "ok" else len(previous) + 1
    scheduler, jobid = scheduler_job_id()
    host, pid = socket.gethostname(), os.getpid()
    wildcards = dict(smk.wildcards.items())
    start = {"event": "start", "rule": smk.rule, "wildcards": wildcards,
             "attempt": attempt, "mem_mb": _number(res.get("mem_mb")),
             "runtime": _number(res.get("runtime")), "threads": smk.threads,
             "start": time.time(), "host": host, "pid": pid,
             "scheduler": scheduler, "jobid": jobid, "deadline": scheduler_deadline()}
    before = previous[-1] if previous and previous[-1].get("attempt") == attempt - 1 else None
    runs, line = retry_verdict(before, attempt, rule=smk.rule,
                               wildcards=",".join(f"{k}={v}" for k, v in wildcards.items()))
    _append(path, start)
    if not runs:
        _append(path, {"event": "end", "pid": pid, "host": host, "attempt": attempt,
                       "ok": False, "end": time.time(), "reason": "not_retried",
                       "stopped_attempt": before.get("stopped_attempt", before.get("attempt")),
                       "signal": before.get("signal"), "message": line})
        with open(smk.log[0], "a") as fh:
            fh.write(line + "\n")
        sys.exit(line)
    if line:
        logging.getLogger("ncreel").warning(line)
    hook = sys.excepthook

    def excepthook(kind, value, tb):
        _FAILED.append(failure_reason(value))
        from ncreel.core.errors import NcreelError, disk_full_line

        if _FAILED[-1] == "disk":  # ncreel status names the disk with it
            _MESSAGE.append(disk_full_line(value))
        elif isinstance(value, NcreelError):  # and a job's own one line (bad input)
            _MESSAGE.append(str(value).splitlines()[0] if str(value) else kind.__name__)
        sig = failure_signal(value)
        if sig:
            _SIGNAL.append(sig)
        hook(kind, value, tb)

    sys.excepthook = excepthook

    def end():
        if os.getpid() != pid:
            return  # a forked worker's exit is not the job's end
        record = {"event": "end", "pid": pid, "host": host, "attempt": attempt,
                  "ok": not _FAILED, "end": time.time()}
        if _FAILED:
            record["reason"] = _FAILED[0]
        if _SIGNAL:
            record["signal"] = _SIGNAL[0]
        if _MESSAGE:
            record["message"] = _MESSAGE[0]
        _append(path, record)

    atexit.register(end)


def exit_failed(message: str) -> NoReturn:
    """End the job with `message` on stderr and exit status 1, its attempt recorded failed.

    ``sys.exit`` bypasses :data:`sys.excepthook`, so a job that stops on purpose says so
    here, in the job's log file too (:func:`ncreel.run.logs.configure`), which Snakemake
    points the user to; the ``end`` record written at exit then has ``ok: false``.
    """
    _FAILED.append("data")
    _MESSAGE.append(message.removeprefix("ncreel: error: "))
    record = logging.makeLogRecord({"name": "ncreel", "msg": message,
                                    "levelno": logging.ERROR, "levelname": "ERROR"})
    for handler in logging.getLogger().handlers:
        if isinstance(handler, logging.FileHandler):  # stderr gets it from sys.exit
            handler.handle(record)
    sys.exit(message)


def _number(value):
    return value if isinstance(value, (int, float)) else None


def _append(path: Path, record: dict) -> None:
    # One write() of one short line with O_APPEND: attempts of one job never interleave.
    # On a full disk the record is lost, never a traceback of its own at the job's exit.
    try:
        with open(path, "a") as fh:
            fh.write(json.dumps(record) + "\n")
    except OSError as err:
        from ncreel.core.errors import disk_full

        if disk_full(err) is None:
            raise
