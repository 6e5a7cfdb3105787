"""Progress lines a person can follow in a running job's log (``tail -f logs/<run>/…``).

The controller's terminal gets the whole run's shard counts from :mod:`ncreel.cluster.runwatch`
(apart, so that jobs do not import the status readers).

A shard job on a cluster runs for minutes to hours with nothing to show but its log; a
:class:`Progress` writes ``done/total``, the rate, an ETA and any counters (rows written) to
the job log at a bounded rate: when another 10 % is done or 30 s have passed since the
last line, whichever comes first, plus a final line. The lines go to the logger
``ncreel.run.progress``, which :func:`ncreel.run.logs.configure` sends to the job's log file only,
so Snakemake's own output (the terminal of a local run) is unchanged.
"""

from __future__ import annotations

import logging
import os
import time

LOGGER = "ncreel.run.progress"
#: Log when another this fraction of the total is done...
EVERY_FRACTION = 0.1
#: ...or when this many seconds have passed since the last line.
EVERY_S = 30.0


def current_log_file() -> str | None:
    """Return the file this process logs to (the job's ``log:``), for worker processes."""
    for h in logging.getLogger().handlers:
        if isinstance(h, logging.FileHandler):
            return h.baseFilename
    return None


class Progress:
    """Count work done and log it at a bounded rate.

    Parameters
    ----------
    total : int
        Units of work in all (frames, time steps).
    label : str
        What is counted, at the start of each line (e.g. ``shard 00003 frames 0..239``).
    unit : str
        Name of one unit, plural (``frames``).
    log_file : path, optional
        Append the lines to this file when this process has no logging set up (a spawned
        render worker); see :func:`current_log_file`.
    every_fraction, every_s : float
        Line when another `every_fraction` of `total` is done, or `every_s` seconds passed.
    clock : callable
        Monotonic seconds (tests pass a fake clock).
    """

    def __init__(self, total: int, label: str, *, unit: str = "frames",
                 log_file: str | os.PathLike | None = None,
                 every_fraction: float = EVERY_FRACTION, every_s: float = EVERY_S,
                 clock=time.monotonic):
        self.total, self.label, self.unit = int(total), label, unit
        self.every_fraction, self.every_s, self.clock = every_fraction, every_s, clock
        self.log = logging.getLogger(LOGGER)
        if log_file and not logging.getLogger().handlers and not self.log.handlers:
            handler = logging.FileHandler(log_file, mode="a")
            handler.setFormatter(logging.Formatter(
                "%(asctime)s %(levelname)s %(name)s[%(process)d]: %(message)s"))
            self.log.addHandler(handler)
            self.log.setLevel(logging.INFO)
        self.t0 = self.last_t = clock()
        self.done = 0
        self.next_done = self._step()
        self.lines = 0

    def _step(self) -> int:
        return max(1, int(self.total * self.every_fraction))

    def update(self, done: int, **counters) -> None:
        """Record that `done` units are done; log a line if one is due.

        Parameters
        ----------
        done : int
            Units done so far (not an increment).
        **counters
            Further numbers for the line, e.g. ``rows=12345``.
        """
        self.done = int(done)
        now = self.clock()
        if self.done >= self.total or self.done >= self.next_done or \
                now - self.last_t >= self.every_s:
            self._line(now, counters)

    def _line(self, now: float, counters) -> None:
        elapsed = now - self.t0
        rate = self.done / elapsed if elapsed > 0 else 0.0
        left = self.total - self.done
        eta = f"{left / rate:.0f} s" if rate > 0 and left > 0 else ("0 s" if left <= 0 else "?")
        extra = "".join(f", {k} {v}" for k, v in counters.items())
        pct = 100.0 * self.done / self.total if self.total else 100.0
        self.log.info("%s: %d/%d %s (%.0f %%), %.2f %s/s, ETA %s%s", self.label, self.done,
                      self.total, self.unit, pct, rate, self.unit, eta, extra)
        self.lines += 1
        self.last_t = now
        step = self._step()
        self.next_done = (self.done // step + 1) * step
