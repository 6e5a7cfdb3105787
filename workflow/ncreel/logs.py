"""Logging set-up shared by the workflow's script adapters."""

from __future__ import annotations

import logging
import os
import sys


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
    stderr.addFilter(lambda record: not record.name.startswith("ncreel.progress"))
    handlers: list[logging.Handler] = [stderr]
    if log_file:
        os.makedirs(os.path.dirname(os.path.abspath(log_file)), exist_ok=True)
        # Start empty, then write in append mode: render workers append their progress lines
        # to the same file, and O_APPEND keeps every writer's lines whole and in place.
        open(log_file, "w").close()
        handlers.append(logging.FileHandler(log_file, mode="a"))
    logging.basicConfig(level=level, handlers=handlers, force=True,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.captureWarnings(True)
    sys.excepthook = _log_uncaught


def _log_uncaught(kind, value, tb) -> None:
    # The job's log file must say why the job failed, not only Snakemake's console.
    from ncreel.errors import NcreelError

    if issubclass(kind, NcreelError):  # bad input, said in one line: no traceback
        logging.getLogger("ncreel").error("ncreel: error: %s", value)
        return
    logging.getLogger("ncreel").error("%s: %s", kind.__name__, value,
                                      exc_info=(kind, value, tb))
