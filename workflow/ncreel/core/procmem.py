"""Resident memory of a process, read from Linux's ``/proc``.

Why not ``getrusage``: a child's ``ru_maxrss`` includes the image of the process it was
forked (or vforked) from, because Linux carries the old memory's high-water mark across
``execve``. ffmpeg started from a 180 MB Python worker would report at least 180 MB whatever
it used itself. ``VmHWM`` in ``/proc/<pid>/status`` is the high-water mark of the process's
current memory only, which is what a scheduler sampling the job's RSS sees.
"""

from __future__ import annotations

import resource


def _status_mb(pid: int | str, key: str) -> float | None:
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith(key + ":"):
                    return int(line.split()[1]) / 1024  # kB
    except (OSError, ValueError, IndexError):
        pass
    return None


def peak_rss_mb(pid: int | str = "self") -> float | None:
    """Peak resident memory (``VmHWM``) of `pid`'s current image, MiB.

    For ``"self"`` falls back to ``ru_maxrss`` where ``/proc`` is missing; for another
    process returns None when it cannot be read (not Linux, or the process has exited).
    """
    value = _status_mb(pid, "VmHWM")
    if value is None and pid == "self":
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return value


def current_rss_mb() -> float:
    """Resident memory of this process now (``VmRSS``), MiB; its peak where unknown."""
    value = _status_mb("self", "VmRSS")
    return value if value is not None else peak_rss_mb("self")


__all__ = ["current_rss_mb", "peak_rss_mb"]
