"""Each job's record of what it declared, one line per attempt, next to its log.

Snakemake deletes a job's log and overwrites its ``benchmark:`` file on every attempt, and
its metadata (``.snakemake/metadata``) keeps neither resources nor attempts. So every job
appends to ``<log>.attempts.jsonl`` (which Snakemake does not touch) a ``start`` line with
the resources it runs under (``mem_mb``, ``runtime``, ``threads``, as Snakemake evaluated
them for this attempt), the host and the scheduler's job id, and an ``end`` line when its
script finishes (``ok`` false on an exception). An attempt killed by the scheduler (memory,
walltime) or by a signal leaves no ``end`` line.

The ``start`` lines after the last successful ``end`` before them are the attempts of the
current result; older groups belong to earlier runs of the same job.
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
#: no ``end`` line: :func:`read_attempts` calls it ``killed``.
FAILURE_REASONS = ("memory", "interrupted", "data", "disk", "error")


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
        One dict per ``start`` line since the last successful attempt of an earlier run:
        the start line's fields (``attempt``, ``mem_mb``, ``runtime`` in minutes,
        ``threads``, ``start`` epoch seconds, ``host``, ``scheduler``, ``jobid``) plus
        ``status``: ``ok``, ``failed`` (script raised), ``killed`` (no end line and a later
        attempt exists) or ``running`` (no end line yet, the newest attempt), and for a
        failed attempt ``reason`` (one of :data:`FAILURE_REASONS`). Empty if the file
        does not exist.
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
        if rec.get("event") == "start":
            if groups[-1] and groups[-1][-1].get("status") == "ok":
                groups.append([])
            groups[-1].append({**rec, "status": "running"})
        elif rec.get("event") == "end" and groups[-1]:
            last = groups[-1][-1]
            if last.get("pid") == rec.get("pid"):
                last["status"] = "ok" if rec.get("ok") else "failed"
                last["end"] = rec.get("end")
                if not rec.get("ok"):
                    last["reason"] = rec.get("reason", "error")
    attempts = groups[-1]
    for a in attempts[:-1]:
        if a["status"] == "running":
            a["status"] = "killed"
    return attempts


def record_attempt(smk) -> None:
    """Append this attempt's ``start`` line and arrange its ``end`` line.

    Parameters
    ----------
    smk : snakemake.script.Snakemake
        The ``snakemake`` object of a rule's script (``log[0]``, ``rule``, ``wildcards``,
        ``resources``, ``threads``).
    """
    if not smk.log:
        return
    path = attempts_path(smk.log[0])
    path.parent.mkdir(parents=True, exist_ok=True)
    previous = read_attempts(path)
    attempt = 1 if not previous or previous[-1]["status"] == "ok" else len(previous) + 1
    scheduler, jobid = scheduler_job_id()
    res = smk.resources
    start = {"event": "start", "rule": smk.rule, "wildcards": dict(smk.wildcards.items()),
             "attempt": attempt, "mem_mb": _number(res.get("mem_mb")),
             "runtime": _number(res.get("runtime")), "threads": smk.threads,
             "start": time.time(), "host": socket.gethostname(), "pid": os.getpid(),
             "scheduler": scheduler, "jobid": jobid}
    _append(path, start)
    hook = sys.excepthook

    def excepthook(kind, value, tb):
        _FAILED.append(failure_reason(value))
        hook(kind, value, tb)

    sys.excepthook = excepthook

    def end():
        record = {"event": "end", "pid": os.getpid(), "ok": not _FAILED, "end": time.time()}
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
