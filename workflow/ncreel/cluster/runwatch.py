"""The controller's shard progress: how a whole run goes, in its terminal and log.

The controller (the ``snakemake`` process that runs or submits every job) says how the
run's shards go -- ``ncreel: shards 37/120 done, 8 running, 75 queued · 412 frames/s ·
ETA 00:04:10`` -- from the same files ``ncreel status`` reads
(:func:`ncreel.cluster.runstatus.shard_status`: each shard's outputs, Snakemake's
incomplete markers and each job's attempts record) plus the frame counts of running
shards from their progress lines; it asks no scheduler anything.
"""

from __future__ import annotations

import os
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from ncreel.run.progress import EVERY_FRACTION, EVERY_S

#: A render worker's line in its shard's log (see ncreel.render.segment.render_range).
_FRAME_LINE = re.compile(r"shard \d+ frames (\d+)\.\.(\d+): (\d+)/\d+ frames")
#: Read at most this much of the end of a running shard's log.
_LOG_TAIL_BYTES = 1 << 18


def shard_frames_done(log_file: str | os.PathLike) -> int:
    """Frames a running shard has drawn so far, from the progress lines in its job log.

    Parameters
    ----------
    log_file : path
        The shard job's ``log:`` file (``logs/<run>/process_shard/<shard>.log``).

    Returns
    -------
    int
        The sum over its render workers (each logs its own frame range) of the newest
        count; 0 when the log does not exist yet or has no such line.
    """
    try:
        with open(log_file, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            fh.seek(max(0, fh.tell() - _LOG_TAIL_BYTES))
            text = fh.read().decode(errors="replace")
    except FileNotFoundError:
        return 0
    newest = {}
    for m in _FRAME_LINE.finditer(text):
        newest[(m[1], m[2])] = int(m[3])
    return sum(newest.values())


@dataclass(frozen=True)
class RunCounts:
    """How a run's shards stand at one moment.

    ``done`` shards are finished; ``running`` ones have a job process that has begun;
    ``queued`` ones are all the rest (submitted and waiting for the scheduler, waiting
    for a free core, or not yet submitted). ``frames_done`` counts the frames of done
    shards plus those running shards have drawn so far.
    """

    shards: int
    done: int
    running: int
    queued: int
    frames: int
    frames_done: int


def run_counts(rows: list[dict], log_of: Callable[[str], str | os.PathLike] | None = None
               ) -> RunCounts:
    """Count shards by state.

    Parameters
    ----------
    rows : list of dict
        :func:`ncreel.cluster.runstatus.shard_status` rows (``shard``, ``frames``,
        ``state``, ``started``).
    log_of : callable, optional
        Shard name -> its job's log file, to count the frames of running shards; without
        it only done shards' frames count.
    """
    done = [r for r in rows if r["state"] == "done"]
    running = [r for r in rows if r["state"] == "running" and r.get("started")]
    frames_done = sum(r["frames"] for r in done)
    if log_of is not None:
        frames_done += sum(min(r["frames"], shard_frames_done(log_of(r["shard"])))
                           for r in running)
    return RunCounts(shards=len(rows), done=len(done), running=len(running),
                     queued=len(rows) - len(done) - len(running),
                     frames=sum(r["frames"] for r in rows), frames_done=frames_done)


def clock_text(seconds: float) -> str:
    """``HH:MM:SS`` of a duration in seconds (hours past 99 as they are)."""
    s = max(0, round(seconds))
    return f"{s // 3600:02d}:{s % 3600 // 60:02d}:{s % 60:02d}"


def run_line(c: RunCounts, frames_per_s: float | None, unit: str = "frames") -> str:
    """Return the controller's progress line.

    Parameters
    ----------
    c : RunCounts
        The run's shards now.
    frames_per_s : float or None
        Frames drawn per second of wall time since the controller started; None or 0
        when nothing has been drawn yet (the ETA is then unknown, ``?``).
    unit : str
        What a shard's steps are in the line: ``frames``, or ``steps`` for a run without
        a movie (config ``outputs``).

    Returns
    -------
    str
        e.g. ``ncreel: shards 37/120 done, 8 running, 75 queued · 412 frames/s · ETA
        00:04:10``; the ETA is the frames left divided by `frames_per_s`.
    """
    head = f"ncreel: shards {c.done}/{c.shards} done, {c.running} running, {c.queued} queued"
    if not frames_per_s:
        return f"{head} · - {unit}/s · ETA ?"
    left = c.frames - c.frames_done
    return f"{head} · {_rate(frames_per_s)} {unit}/s · ETA {clock_text(left / frames_per_s)}"


def final_line(c: RunCounts, elapsed_s: float, frames_per_s: float | None, ok: bool,
               unit: str = "frames", reason: str | None = None) -> str:
    """Return the controller's last progress line, when its run ends.

    Parameters
    ----------
    c : RunCounts
        The run's shards at the end.
    elapsed_s : float
        Wall time of the controller, s.
    frames_per_s : float or None
        As in :func:`run_line`.
    ok : bool
        Whether the run ended successfully.
    unit : str
        As in :func:`run_line`.
    reason : str, optional
        Why a run that failed stopped, when it is not for the same command to cure: a
        full disk (:func:`ncreel.cluster.runstatus.disk_stop`).
    """
    rate = f" · {_rate(frames_per_s)} {unit}/s" if frames_per_s else ""
    if ok and c.done == c.shards:
        return (f"ncreel: shards {c.done}/{c.shards} done{rate} · "
                f"{clock_text(elapsed_s)} in all")
    head = (f"ncreel: run stopped after {clock_text(elapsed_s)}: shards {c.done}/{c.shards} "
            f"done, {c.shards - c.done} not{rate}")
    if reason and not ok:
        return f"{head}; stopped on a full disk ({reason})"
    return f"{head}; the same command resumes it"


def _rate(frames_per_s: float) -> str:
    return f"{frames_per_s:.0f}" if frames_per_s >= 10 else f"{frames_per_s:.2g}"


class RunWatch:
    """Say the run's shard counts at a bounded rate while it runs, and a final line.

    A line when another `every_fraction` of the shards is done, or `every_s` seconds
    after the last one if anything changed (at the latest after `quiet_s`). The counts are
    read every `poll_s` seconds, less often when reading them is slow (at most a tenth
    of the time goes to reading: 10 000 shards on a parallel file system).

    Parameters
    ----------
    read_rows : callable
        ``() -> rows`` of :func:`ncreel.cluster.runstatus.shard_status`; raises
        FileNotFoundError while the run has no shard plan yet.
    say : callable
        Writes one line (the controller's logger).
    log_of : callable, optional
        Shard name -> its log file (see :func:`run_counts`).
    clock : callable
        Monotonic seconds (tests pass a fake clock).
    unit : str
        ``frames``, or ``steps`` for a run without a movie (:func:`run_line`).
    stop_reason : callable, optional
        ``() -> str or None``: a full disk the run stopped on (:func:`final_line`).
    """

    def __init__(self, read_rows: Callable[[], list[dict]], say: Callable[[str], None], *,
                 log_of: Callable[[str], str | os.PathLike] | None = None,
                 every_s: float = EVERY_S, every_fraction: float = EVERY_FRACTION,
                 quiet_s: float = 300.0, poll_s: float = 5.0, clock=time.monotonic,
                 unit: str = "frames", stop_reason: Callable[[], str | None] | None = None):
        self.read_rows, self.say, self.log_of = read_rows, say, log_of
        self.unit, self.stop_reason = unit, stop_reason
        self.every_s, self.every_fraction, self.quiet_s = every_s, every_fraction, quiet_s
        self.poll_s, self.clock = poll_s, clock
        self.t0 = self.t_no_plan = clock()
        self.base_frames = 0  # frames done when the controller started (a resumed run)
        self.first: tuple[float, int] | None = None  # (time, frames done) the rate is from
        self.last: tuple[float, RunCounts] | None = None  # at the last line said
        self.counts: RunCounts | None = None
        self.lines: list[str] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def frames_per_s(self, c: RunCounts, now: float) -> float | None:
        """Return frames drawn per second since the shard plan was made.

        Frames done before the controller started (a resumed run's) do not count. The plan
        was made between the last read that found none and the first that found it: the
        earlier of the two is taken (the rate is never overstated).
        """
        if self.first is None or now <= self.first[0]:
            return None
        return max(0, c.frames_done - self.first[1]) / (now - self.first[0])

    def poll(self) -> str | None:
        """Read the counts once; say and return a line if one is due."""
        try:
            c = run_counts(self.read_rows(), self.log_of)
        except FileNotFoundError:
            self.t_no_plan = self.clock()
            return None  # no plan yet: statistics and calibration come first
        now = self.clock()
        self.counts = c
        if self.first is None:
            self.first = (self.t_no_plan, self.base_frames)
        due = self.last is None
        if not due:
            t_last, c_last = self.last
            step = max(1, int(c.shards * self.every_fraction))
            due = (c.done // step > c_last.done // step
                   or (now - t_last >= self.every_s and c != c_last)
                   or now - t_last >= self.quiet_s)
        if not due:
            return None
        self.last = (now, c)
        return self._say(run_line(c, self.frames_per_s(c, now), self.unit))

    def finish(self, ok: bool) -> str | None:
        """Stop watching; say and return the final line (None if the run had no plan)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=60)
        try:
            c = run_counts(self.read_rows(), self.log_of)
        except FileNotFoundError:
            return None
        except Exception as err:  # a progress line must never turn an ending into a crash
            return self._say(f"ncreel: note: no last progress line ({err})")
        now = self.clock()
        reason = self.stop_reason() if self.stop_reason is not None and not ok else None
        return self._say(final_line(c, now - self.t0, self.frames_per_s(c, now), ok,
                                    self.unit, reason))

    def start(self) -> None:
        """Note what is done already, then poll in a daemon thread until :meth:`finish`."""
        try:
            self.base_frames = run_counts(self.read_rows(), self.log_of).frames_done
            self.first = (self.clock(), self.base_frames)
        except FileNotFoundError:
            pass

        def loop():
            wait = self.poll_s
            while not self._stop.wait(wait):
                t = time.monotonic()
                try:
                    self.poll()
                except Exception as err:  # a progress line must never stop the run
                    self._say(f"ncreel: note: no more progress lines ({err})")
                    return
                wait = max(self.poll_s, 10 * (time.monotonic() - t))

        self._thread = threading.Thread(target=loop, name="ncreel-progress", daemon=True)
        self._thread.start()

    def _say(self, line: str) -> str:
        self.lines.append(line)
        self.say(line)
        return line


def watch_run(workdir: str | os.PathLike, run: str, say: Callable[[str], None],
              **kw) -> RunWatch:
    """Return a :class:`RunWatch` of `run` in `workdir`, for the controller of that run.

    Shards its Snakemake submitted count as queued until their job starts; no scheduler
    is asked (``ncreel status`` asks; the controller knows its jobs are live).
    """
    from pathlib import Path

    from ncreel.cluster.runstatus import disk_stop, shard_status

    logs = Path(workdir) / "logs" / run / "process_shard"
    return RunWatch(
        lambda: shard_status(workdir, run, ask_scheduler=lambda scheduler, jobid: "submitted"),
        say, log_of=lambda shard: logs / f"{shard}.log",
        stop_reason=lambda: disk_stop(workdir, run), **kw)
