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
    job's failure counts as a memory failure (:func:`ncreel.jobrecord.failure_reason`);
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

    The job's failure counts as ``disk`` (:func:`ncreel.jobrecord.failure_reason`), which
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
