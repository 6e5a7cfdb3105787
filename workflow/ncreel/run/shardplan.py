"""Split the time axis into frame shards: one Snakemake job each."""

from __future__ import annotations

import os
from dataclasses import dataclass


@dataclass(frozen=True)
class Shard:
    """Consecutive time steps ``start:stop`` rendered and tabulated by one job.

    Attributes
    ----------
    index : int
        0-based position in time order.
    start, stop : int
        Half-open range of global time indices.
    """

    index: int
    start: int
    stop: int

    @property
    def name(self) -> str:
        """Zero-padded name used as the ``{shard}`` wildcard; sorts in time order."""
        return f"{self.index:05d}"

    @property
    def n_frames(self) -> int:
        """Number of time steps (frames) in the shard."""
        return self.stop - self.start


def plan_shards(n_time: int, frames_per_shard: int) -> list[Shard]:
    """Split ``range(n_time)`` into consecutive shards of at most `frames_per_shard` steps.

    Sizes differ by at most one frame, so the last job is never a tiny straggler
    (e.g. 240 steps at 100 per shard gives 80+80+80, not 100+100+40).

    Parameters
    ----------
    n_time : int
        Number of time steps, >= 1.
    frames_per_shard : int
        Upper bound on a shard's time steps, >= 1.

    Returns
    -------
    list of Shard
        ``ceil(n_time / frames_per_shard)`` shards covering every step exactly once, in order.

    Raises
    ------
    ValueError
        If either argument is below 1.
    """
    if n_time < 1:
        raise ValueError(f"n_time must be >= 1, got {n_time}")
    if frames_per_shard < 1:
        raise ValueError(f"frames_per_shard must be >= 1, got {frames_per_shard}")
    n_shards = -(-n_time // frames_per_shard)
    base, extra = divmod(n_time, n_shards)
    shards, start = [], 0
    for i in range(n_shards):
        stop = start + base + (1 if i < extra else 0)
        shards.append(Shard(i, start, stop))
        start = stop
    return shards


def fill_cores(frames_per_shard: int, n_time: int, cores: int | None,
               workers: int = 1) -> int:
    """Shorten a computed shard length so that a local run's shards keep its cores busy.

    A local run of ``--cores C`` runs ``C // workers`` shard jobs of `workers` threads at
    once: fewer shards than that leave cores idle however long each shard is. The
    longest length not above `frames_per_shard` that plans at least ``ceil(C / workers)``
    shards (:func:`plan_shards`) is returned, never below one step.

    Parameters
    ----------
    frames_per_shard : int
        The length that fills the target job time, >= 1.
    n_time : int
        Time steps of the run, >= 1.
    cores : int or None
        The run's cores (Snakemake's ``--cores``); None for a run on a cluster, whose
        jobs each get their own cores: the length is then kept.
    workers : int
        Threads of one shard job (``render_processes``).

    Returns
    -------
    int
        Between 1 and `frames_per_shard`.

    Raises
    ------
    ValueError
        If `frames_per_shard` or `n_time` is below 1.
    """
    if frames_per_shard < 1 or n_time < 1:
        raise ValueError(f"frames_per_shard={frames_per_shard}, n_time={n_time}: need >= 1")
    if not cores or cores <= 1:
        return frames_per_shard
    jobs = -(-int(cores) // max(int(workers), 1))
    length = min(frames_per_shard, -(-n_time // jobs))
    # ceil(n / length) may still fall short of `jobs` (9 steps on 4 cores: 3 gives 3
    # shards): shorten until it does not, or one step is left.
    while length > 1 and -(-n_time // length) < jobs:
        length -= 1
    return max(length, 1)


def frame_name(time_index: int) -> str:
    """File name of the PNG frame for global time index `time_index`."""
    return f"frame_{time_index:06d}.png"


class ShardPlanCache:
    """The run's shard plan from ``calibration.json``, built once per version of that file.

    Snakemake asks for the plan for every shard job's params and resources: a 10 000-shard
    DAG would otherwise read the file and build the plan 10 000s of times. The plan is
    built again when the file changes (its path or modification time).
    """

    def __init__(self) -> None:
        self._stamp: tuple | None = None
        self._plan: dict[str, Shard] = {}

    def plan(self, calibration: str | os.PathLike, n_time: int) -> dict[str, Shard]:
        """Return the shards by name, in time order, ``frames_per_shard`` from `calibration`.

        Raises
        ------
        NcreelError
            As :meth:`ncreel.config.settings.Calibration.from_json`.
        """
        stamp = (os.fspath(calibration), os.stat(calibration).st_mtime_ns, n_time)
        if stamp != self._stamp:
            from ncreel.config.settings import Calibration

            frames = Calibration.from_json(calibration).frames_per_shard
            self._plan = {s.name: s for s in plan_shards(n_time, frames)}
            self._stamp = stamp
        return self._plan


def worker_ranges(shard: Shard, workers: int, chunk_starts=()) -> list[tuple[int, int]]:
    """Split a shard into `workers` contiguous ranges of about equal length.

    A boundary within a quarter of a range's length of a time chunk's start
    (:meth:`ncreel.input.source.Series.chunk_starts`) moves there, so that no chunk read
    whole is decompressed by two workers.

    Parameters
    ----------
    shard : Shard
    workers : int
        Ranges wanted, 1 .. ``shard.n_frames``.
    chunk_starts : sequence of int
        Ascending global time indices inside the shard where a chunk begins.

    Returns
    -------
    list of (int, int)
        Half-open ranges of global time indices, in order, covering the shard.
    """
    ranges = [(shard.start + p.start, shard.start + p.stop)
              for p in plan_shards(shard.n_frames, -(-shard.n_frames // workers))]
    starts = list(chunk_starts)
    if not starts or len(ranges) < 2:
        return ranges
    slack = (shard.n_frames // len(ranges)) // 4
    bounds = [shard.start]
    for _, b in ranges[:-1]:
        near = min(starts, key=lambda s: (abs(s - b), s))
        bounds.append(near if abs(near - b) <= slack and near > bounds[-1] else b)
    bounds.append(shard.stop)
    pairs = list(zip(bounds[:-1], bounds[1:], strict=True))
    return ranges if any(a >= b for a, b in pairs) else pairs
