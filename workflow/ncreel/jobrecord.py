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

A job's attempts in one Snakemake run have increasing numbers; a ``start`` line whose
number is not above the one before begins a new run. The ``start`` lines of the newest
run are the attempts of the current result; older groups belong to earlier runs.
"""

from __future__ import annotations

import atexit
import json
import os
import socket
import sys
import time
from pathlib import Path
from typing import NoReturn

#: Set when this job's script has failed (uncaught exception or :func:`exit_failed`):
#: why, one of :data:`FAILURE_REASONS`.
_FAILED: list[str] = []

#: Why an attempt failed, in its ``end`` line: ``memory`` (MemoryError), ``interrupted``
#: (SIGINT, SIGTERM, SIGHUP: a user, a logout or the scheduler's walltime), ``data`` (bad
#: input, :class:`ncreel.errors.NcreelError`), ``disk`` (disk full or quota), ``error``
#: (anything else). An attempt killed outright (the scheduler's memory kill, SIGKILL) has
#: no ``end`` line: :func:`read_attempts` calls it ``killed``. An attempt whose script
#: ended ``ok`` but that Snakemake retried (its job failed after the script: deleted,
#: walltime, outputs missing) is read as failed with reason ``after_script``.
FAILURE_REASONS = ("memory", "interrupted", "data", "disk", "error", "after_script")

#: The resource through which a rule gives its script Snakemake's attempt number
#: (``attempt=attempt_resource`` in the rule's ``resources:``, rules/common.smk):
#: Snakemake passes a script its resources but not its attempt. Inside a scheduler job,
#: the job's own Snakemake evaluates it from its ``--attempt``.
ATTEMPT_RESOURCE = "attempt"


def failure_reason(exc: BaseException) -> str:
    """Classify an exception that ended a job into one of :data:`FAILURE_REASONS`."""
    import errno
    import signal

    from ncreel.errors import DiskFull, JobInterrupted, NcreelError, ProgramKilled

    if isinstance(exc, MemoryError):
        return "memory"
    if isinstance(exc, ProgramKilled):
        return "memory" if exc.signum == signal.SIGKILL else "interrupted"
    if isinstance(exc, JobInterrupted | KeyboardInterrupt):
        return "interrupted"
    if isinstance(exc, DiskFull) or (isinstance(exc, OSError)
                                     and exc.errno in (errno.ENOSPC, errno.EDQUOT)):
        return "disk"
    if isinstance(exc, NcreelError):
        return "data"
    return "error"

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
        for a failed attempt ``reason`` (one of :data:`FAILURE_REASONS`). Empty if the
        file does not exist.
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
    """
    if not smk.log:
        return
    path = attempts_path(smk.log[0])
    path.parent.mkdir(parents=True, exist_ok=True)
    res = smk.resources
    attempt = snakemake_attempt(res)
    if attempt is None:
        previous = read_attempts(path)
        attempt = 1 if not previous or previous[-1]["status"] == "ok" else len(previous) + 1
    scheduler, jobid = scheduler_job_id()
    host, pid = socket.gethostname(), os.getpid()
    start = {"event": "start", "rule": smk.rule, "wildcards": dict(smk.wildcards.items()),
             "attempt": attempt, "mem_mb": _number(res.get("mem_mb")),
             "runtime": _number(res.get("runtime")), "threads": smk.threads,
             "start": time.time(), "host": host, "pid": pid,
             "scheduler": scheduler, "jobid": jobid}
    _append(path, start)
    hook = sys.excepthook

    def excepthook(kind, value, tb):
        _FAILED.append(failure_reason(value))
        hook(kind, value, tb)

    sys.excepthook = excepthook

    def end():
        if os.getpid() != pid:
            return  # a forked worker's exit is not the job's end
        record = {"event": "end", "pid": pid, "host": host, "attempt": attempt,
                  "ok": not _FAILED, "end": time.time()}
        if _FAILED:
            record["reason"] = _FAILED[0]
        _append(path, record)

    atexit.register(end)


def exit_failed(message: str) -> NoReturn:
    """End the job with `message` on stderr and exit status 1, its attempt recorded failed.

    ``sys.exit`` bypasses :data:`sys.excepthook`, so a job that stops on purpose says so
    here; the ``end`` record written at exit then has ``ok: false``.
    """
    _FAILED.append("data")
    sys.exit(message)


def _number(value):
    return value if isinstance(value, (int, float)) else None


def _append(path: Path, record: dict) -> None:
    # One write() of one short line with O_APPEND: attempts of one job never interleave.
    with open(path, "a") as fh:
        fh.write(json.dumps(record) + "\n")
