"""Logging set-up shared by the workflow's script adapters."""

from __future__ import annotations

import logging
import os
import signal
import sys

#: Signals that stop a job: Ctrl-C in the controller's terminal (SIGINT to the process
#: group), a batch system's kill at its walltime or on qdel/scancel (SIGTERM), a logout
#: (SIGHUP).
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def configure(log_file: str | os.PathLike | None, level: int = logging.INFO) -> None:
    """Send ``ncreel`` log records and Python warnings to `log_file` and stderr.

    Parameters
    ----------
    log_file : path or None
        The rule's ``log:`` file; created with its parent directory.
    level : int
        Logging level.
    """
    stderr = logging.StreamHandler(sys.stderr)
    # Progress lines are for the job's log file only: a local run's terminal shows
    # Snakemake's own output unchanged.
    stderr.addFilter(lambda record: not record.name.startswith("ncreel.run.progress"))
    handlers: list[logging.Handler] = [stderr]
    if log_file:
        os.makedirs(os.path.dirname(os.path.abspath(log_file)), exist_ok=True)
        # Start empty, then write in append mode: render workers append their progress lines
        # to the same file, and O_APPEND keeps every writer's lines whole and in place.
        open(log_file, "w").close()
        handlers.append(JobLogHandler(log_file, mode="a"))
    logging.basicConfig(level=level, handlers=handlers, force=True,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.captureWarnings(True)
    sys.excepthook = _log_uncaught
    stop_on_signals()


class JobLogHandler(logging.FileHandler):
    """The job's log file, which a full disk stops in one line instead of a traceback.

    :class:`logging.FileHandler` prints a ``--- Logging error ---`` traceback on stderr
    for every record it cannot write; on a full disk (or quota) this handler says once,
    on stderr, that the log stops there, and drops the rest (stderr still has them).
    """

    _stopped = False

    def handleError(self, record: logging.LogRecord) -> None:  # noqa: N802 (logging's name)
        """Say once that the log stops on a full disk; any other failure as logging does."""
        from ncreel.core.errors import disk_full

        err = sys.exc_info()[1]
        if err is None or disk_full(err) is None:
            super().handleError(record)
            return
        if not self._stopped:
            self._stopped = True
            print(f"ncreel: warning: the job's log {self.baseFilename} stops here: no "
                  "space left on its disk", file=sys.stderr)

    def emit(self, record: logging.LogRecord) -> None:
        """Write `record` unless a full disk has stopped the log."""
        if not self._stopped:
            super().emit(record)


def stop_on_signals() -> None:
    """Make SIGINT, SIGTERM and SIGHUP raise :class:`ncreel.core.errors.JobInterrupted`.

    Also when the job inherited SIGINT ignored (a run started in the background of a
    script): a signal to the process group then still stops the job in one piece, with
    one line, instead of killing only its ffmpeg and failing as if memory had run out.
    SIGHUP inherited ignored is left ignored: the run was started under ``nohup`` to
    outlive a hangup, and its controller (which ignores it too) would only retry the job.
    """
    for sig in STOP_SIGNALS:
        if sig == signal.SIGHUP and signal.getsignal(sig) is signal.SIG_IGN:
            continue
        signal.signal(sig, _interrupted)


def _interrupted(signum, frame):
    from ncreel.core.errors import JobInterrupted

    # Once is enough: a second signal while unwinding must not interrupt the clean-up.
    for sig in STOP_SIGNALS:
        signal.signal(sig, signal.SIG_IGN)
    raise JobInterrupted(signum)


def _log_uncaught(kind, value, tb) -> None:
    # The job's log file must say why the job failed, not only Snakemake's console.
    from ncreel.core.errors import JobInterrupted, NcreelError
    from ncreel.run.jobrecord import interruption

    if issubclass(kind, NcreelError):  # bad input, said in one line: no traceback
        logging.getLogger("ncreel").error("ncreel: error: %s", value)
        return
    from ncreel.core.errors import disk_full, disk_full_line

    if disk_full(value) is not None and interruption(value) is None:
        # A full disk, whichever writer met it (polars, numpy, Pillow, ...): one line.
        logging.getLogger("ncreel").error("ncreel: error: %s", disk_full_line(value))
        return
    # A signal during an import can surface wrapped in another error (see interruption).
    value = interruption(value) or value
    kind = type(value)
    if issubclass(kind, JobInterrupted | KeyboardInterrupt):
        what = value.signame if isinstance(value, JobInterrupted) else "SIGINT"
        logging.getLogger("ncreel").error("ncreel: job interrupted by %s; it stopped and "
                                          "kept no partial output", what)
        return
    logging.getLogger("ncreel").error("%s: %s", kind.__name__, value,
                                      exc_info=(kind, value, tb))
