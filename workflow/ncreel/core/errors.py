"""Exceptions whose message is a one-line, user-facing explanation."""


class NcreelError(Exception):
    """Bad input or configuration; ``str(err)`` names the file, variable or key at fault.

    ``str(err)`` is always one line: text quoted from a library (xarray's "no IO backend"
    hint spans several lines) is folded, so ``ncreel: error: ...`` stays one line.
    """

    def __str__(self) -> str:
        return " ".join(super().__str__().split())


class ProgramKilled(NcreelError):
    """An external program (ffmpeg) the job ran was killed by a signal.

    SIGKILL is what an out-of-memory killer or a scheduler's memory limit sends, so the
    job's failure counts as a memory failure (:func:`ncreel.run.jobrecord.failure_reason`);
    any other signal is an interruption.

    Parameters
    ----------
    message : str
        One line naming the program and what it was doing.
    signum : int
        The signal that killed it.
    """

    def __init__(self, message: str, signum: int) -> None:
        super().__init__(message)
        self.signum = int(signum)


class DiskFull(NcreelError):
    """A program the job ran (ffmpeg) could not write: no space left, or over the quota.

    The job's failure counts as ``disk`` (:func:`ncreel.run.jobrecord.failure_reason`), which
    more memory cannot fix, like an ``OSError`` with ``ENOSPC`` or ``EDQUOT`` raised in
    Python.
    """


class JobInterrupted(BaseException):
    """The job received SIGINT, SIGTERM or SIGHUP (Ctrl-C, a scheduler's kill, a logout).

    A :class:`BaseException`, like :class:`KeyboardInterrupt`, so no ``except Exception``
    swallows it: every ``with`` block unwinds (temporary outputs are removed) and the job
    ends with one line saying which signal stopped it, not a traceback.

    Parameters
    ----------
    signum : int
        The signal's number.
    """

    def __init__(self, signum: int) -> None:
        import signal

        self.signum = int(signum)
        self.signame = signal.Signals(self.signum).name
        super().__init__(f"interrupted by {self.signame}")


#: A full disk or an exceeded quota where the error carries no errno: Rust I/O (polars)
#: says "No space left on device (os error 28)", libraries wrap the OS's words.
_DISK_FULL_TEXT = (
    "no space left on device", "disk quota exceeded", "(os error 28)", "(os error 122)")
#: PostgreSQL's SQLSTATE ``disk_full``: the database server's disk.
PG_DISK_FULL = "53100"


def disk_full(exc: BaseException) -> BaseException | None:
    """Return the full-disk (or over-quota) error in `exc` or its causes, or None.

    The kind, whichever writer met it: :class:`DiskFull` (ffmpeg), an ``OSError`` with
    ``ENOSPC`` or ``EDQUOT``, one without an errno whose text says so (polars' CSV
    writer, other wrapped libraries), or PostgreSQL's ``disk_full`` (SQLSTATE 53100, the
    server's disk). Follows ``__cause__`` and ``__context__`` (at most 20 links).
    """
    import errno

    todo, seen = [exc], 0
    while todo and seen < 20:
        e = todo.pop(0)
        seen += 1
        if isinstance(e, DiskFull):
            return e
        if isinstance(e, OSError) and e.errno in (errno.ENOSPC, errno.EDQUOT):
            return e
        if getattr(e, "sqlstate", None) == PG_DISK_FULL:
            return e
        if isinstance(e, Exception) and not isinstance(e, NcreelError) and any(
                t in str(e).lower() for t in _DISK_FULL_TEXT):
            return e
        todo.extend(x for x in (e.__cause__, e.__context__) if x is not None)
    return None


#: The ways to make a run need less disk, in the words of the messages.
DISK_WAYS_OUT = ("make the run smaller: outputs (only the movie or only the table), "
                 "time_range or time_every (fewer steps), cells.region (fewer cells), "
                 "cells.compression (gzip or zstd)")


def disk_full_line(exc: BaseException) -> str:
    """One line for a job that met a full disk (:func:`disk_full`), without ``ncreel: error:``.

    Names the file being written when the error says it, the file system's free space,
    and what to do: free space, or make the run smaller (:data:`DISK_WAYS_OUT`), then run
    the same command again (a job keeps nothing partial under a final name).
    """
    import os

    full = disk_full(exc) or exc
    text = " ".join(str(full).split())
    if getattr(full, "sqlstate", None) == PG_DISK_FULL:
        return (f"the database server's disk is full ({text}): free space on the server, "
                "then run the same command again (the load changed nothing)")
    from ncreel.core.io import OUTPUT_ATTR

    quota = "quota" in text.lower() or getattr(full, "errno", None) == 122
    # The file the error names, else the output the job was writing (ncreel.core.io).
    name = (getattr(full, "filename", None) or getattr(full, OUTPUT_ATTR, None)
            or getattr(exc, OUTPUT_ATTR, None))
    probe = os.path.abspath(os.fspath(name)) if name else os.getcwd()
    while probe and not os.path.exists(probe):
        probe = os.path.dirname(probe)
    try:
        st = os.statvfs(probe or ".")
        free = (f"{st.f_bavail * st.f_frsize / 1e6:,.0f} MB free "
                f"{'there' if name else 'in the working directory'} now")
    except OSError:
        free = "free space unknown"
    what = "over the disk quota" if quota else "no space left on device"
    writing = f" writing '{name}'" if name else ""
    return (f"{what}{writing} ({free}; {text}): free space (or ask for more quota), or "
            f"{DISK_WAYS_OUT}, then run the same command again; nothing partial is kept")
