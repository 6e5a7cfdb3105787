"""Run a scheduler command for its output, with the standard library only."""

from __future__ import annotations

import shutil
import subprocess


def stdout_of(cmd: list[str], timeout: float = 60) -> str | None:
    """Return the standard output of the argument list `cmd` (no shell).

    Returns
    -------
    str or None
        None when the program is not on PATH, fails, or runs longer than `timeout` seconds:
        the callers treat "no answer" alike, whatever the reason.
    """
    if shutil.which(cmd[0]) is None:
        return None
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except (subprocess.TimeoutExpired, OSError):
        return None
    return proc.stdout if proc.returncode == 0 else None
