"""Series-wide statistics streamed over time blocks: colour limits and per-cell means."""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import os
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ncreel.core.errors import NcreelError
from ncreel.core.io import atomic_path
from ncreel.input.identity import check_inputs, input_identities
from ncreel.input.source import BLOCK_BYTES, Series
from ncreel.region.selection import open_selection
from ncreel.run.shardplan import Shard, worker_ranges
from ncreel.run.workers import worker_pool

log = logging.getLogger(__name__)

#: Most histogram bins of the streamed percentiles (see :func:`series_statistics`).
N_BINS = 1 << 16
#: Most distinct values of the data's float type between its smallest and largest value
#: that the first pass counts one by one, so that the percentiles need no second read
#: (6.1 million float32 values lie between 200 and 330 K): 64 MiB of counts.
KEY_BINS_MAX = 1 << 23
#: Values whose keys are counted at once (bounds the pass's temporary keys, 32 MiB).
KEY_SLICE = 1 << 22


def series_statistics(series: Series, *, percentiles: tuple[float, float] = (2.0, 98.0),
                      max_block_bytes: int = BLOCK_BYTES,
                      limits: bool = True, means: bool = True, workers: int = 1,
                      reopen: Callable | None = None) -> tuple[dict, np.ndarray | None]:
    """Compute colour limits and each cell's time mean, reading the series once or twice.

    Pass 1 accumulates per-cell sums and counts (float64), the global min/max and whether
    every value is a whole number, and counts each distinct value of the data's float type
    while at most :data:`KEY_BINS_MAX` of them lie between the smallest and largest seen
    (temperatures in kelvin, pressures, geopotential: fields away from zero). Then the
    percentiles are read from those counts, exactly, and the series is read once. Else
    pass 2 reads it again and fills a histogram whose bins are chosen so that the answer
    is exact where the data allow it:

    - when at most ``N_BINS`` representable values of the data's float type lie between
      min and max (a narrow-range float32 field, a constant field), one bin per value;
    - when every value is a whole number and ``max - min < N_BINS`` (integer data), one
      bin per integer;
    - otherwise ``N_BINS`` equal float64 bins over ``[min, max]``.

    The two order statistics around each percentile's rank are taken from the bins and
    combined as ``numpy.percentile``'s default ``'linear'`` method does, so the result
    equals ``numpy.percentile`` of all finite values (up to float rounding) in the first
    two cases and is within ``(max - min) / N_BINS`` of it in the third. Memory is one
    block plus ``(ny, nx)`` accumulators and at most :data:`KEY_BINS_MAX` counts, whatever
    the series length.

    With `workers` > 1 each pass is split into that many contiguous time ranges (ending
    where time chunks end, at least :data:`MIN_WORKER_STEPS` steps each), read at once by
    worker processes that open the series with `reopen`; their counts, extremes and
    per-cell sums are added in time order, so limits and counts are those of one process
    and the cell means agree with one process's to float64 rounding. Memory is then one
    process's per worker, plus the merged accumulators.

    Parameters
    ----------
    series : Series
        Opened series of shape ``(n_time, ny, nx)``.
    percentiles : (float, float)
        Lower and upper percentile (0-100) for the robust colour range.
    max_block_bytes : int
        Bound on the size of one block read from disk.
    limits : bool
        Compute the percentiles (the colour limits). False skips the second pass: a run
        without a movie needs only the cell means; ``vmin``, ``vmax`` and ``binning``
        are then None.
    means : bool
        Compute each cell's mean. False (a run without a table, or a second series whose
        limits alone are wanted) skips the per-cell sums: `cell_mean` is then None.
    workers : int
        Worker processes (the job's ``threads``); 1 reads in this process.
    reopen : callable, optional
        Picklable; ``reopen()`` is a context manager giving the same series as `series`
        in a worker process; without it every pass reads in this process.

    Returns
    -------
    stats : dict
        ``vmin``, ``vmax`` (variable units; the percentiles), ``min``, ``max``,
        ``n_finite``, ``n_time``, ``ny``, ``nx``, ``percentiles``, ``binning``
        (``"values"``, ``"integers"`` or ``"linear"``: which of the cases above; the
        values counted in pass 1 are ``"values"``) and ``reads`` (1 or 2: how often the
        series was read).
    cell_mean : numpy.ndarray, shape (ny, nx), float64, or None
        Mean over time of each cell's finite values; NaN where a cell is never finite.
        None when `means` is False.
    """
    ranges = _ranges(series, workers if reopen is not None else 1)
    with contextlib.ExitStack() as stack:
        if len(ranges) == 1:
            def read_parts(fn, **kwargs):
                return [fn(series, 0, series.n_time, **kwargs)]
        else:
            log.info("statistics of '%s': %d worker processes, time steps %s",
                     series.variable, len(ranges),
                     ", ".join(f"{a}..{b - 1}" for a, b in ranges))
            # One pool for both passes: its processes start (and import) once.
            run = stack.enter_context(worker_pool(len(ranges)))

            def read_parts(fn, **kwargs):
                return run([(_in_worker, (reopen, fn, a, b), kwargs) for a, b in ranges])
        return _passes(series, read_parts, percentiles=percentiles, limits=limits,
                       means=means, max_block_bytes=max_block_bytes)


def _passes(series: Series, read_parts: Callable, *, percentiles, limits: bool,
            means: bool, max_block_bytes: int) -> tuple[dict, np.ndarray | None]:
    """Read :func:`series_statistics`' passes with `read_parts`, merge, finish.

    ``read_parts(fn, **kwargs)`` returns each time range's ``fn(series, start, stop,
    **kwargs)``, in time order (in this process or in worker processes).
    """
    parts = read_parts(_first_pass, limits=limits, means=means,
                       max_block_bytes=max_block_bytes)
    part = _Partial.merged(parts)
    lo, hi, n_finite, keys = part.lo, part.hi, part.n_finite, part.keys
    dtype, integral = part.dtype or np.dtype(series.dtype), part.integral
    cell_mean = None
    if means:
        with np.errstate(invalid="ignore", divide="ignore"):
            cell_mean = np.where(part.count > 0, part.total / np.maximum(part.count, 1),
                                 np.nan)
    del parts, part
    binning = None
    reads = 1
    if not limits:
        vmin = vmax = None
    elif n_finite == 0:
        vmin = vmax = float("nan")
    elif lo == hi:
        vmin = vmax = lo
        binning = "values"
    elif keys.counts is not None:  # every value counted: no second read
        bins = _Bins("values", lo, hi, keys.counts.size, keys.dtype, keys.key0)
        binning = bins.kind
        vmin, vmax = (_percentile(keys.counts, bins, p) for p in percentiles)
    else:
        bins = _Bins.choose(lo, hi, dtype, integral)
        binning = bins.kind
        hist = sum(read_parts(_histogram, bins=bins, max_block_bytes=max_block_bytes))
        vmin, vmax = (_percentile(hist, bins, p) for p in percentiles)
        reads = 2
    stats = {"vmin": vmin, "vmax": vmax, "min": lo if n_finite else None,
             "max": hi if n_finite else None, "percentiles": list(percentiles),
             "binning": binning, "n_finite": n_finite, "n_time": series.n_time,
             "ny": series.ny, "nx": series.nx, "reads": reads}
    return stats, cell_mean


#: Fewest time steps a statistics worker process reads: below this, one process.
MIN_WORKER_STEPS = 8


def _ranges(series: Series, workers: int) -> list[tuple[int, int]]:
    """Split the series into contiguous time ranges, one per worker, at time chunks."""
    workers = max(1, min(int(workers), series.n_time // MIN_WORKER_STEPS))
    whole = Shard(0, 0, series.n_time)
    if workers == 1:
        return [(0, series.n_time)]
    return worker_ranges(whole, workers, series.chunk_starts(0, series.n_time))


@dataclass
class _Partial:
    """Pass 1 of :func:`series_statistics` over some time steps; parts merge exactly.

    ``total``/``count``: per-cell float64 sums and counts of finite values, shape (ny, nx)
    (None without means); ``lo``/``hi``: the smallest and largest finite value;
    ``integral``: every value a whole number; ``dtype``: the float type read last;
    ``keys``: the counts of each value (:class:`_KeyCounts`).
    """

    total: np.ndarray | None
    count: np.ndarray | None
    lo: float
    hi: float
    n_finite: int
    integral: bool
    dtype: np.dtype | None
    keys: _KeyCounts

    @classmethod
    def merged(cls, parts: list[_Partial]) -> _Partial:
        """Combine `parts` (in time order) into the pass over all their steps."""
        first = parts[0]
        for part in parts[1:]:
            if first.total is not None:
                first.total += part.total
                first.count += part.count
            first.lo, first.hi = min(first.lo, part.lo), max(first.hi, part.hi)
            first.n_finite += part.n_finite
            first.integral = first.integral and part.integral
            first.dtype = part.dtype or first.dtype
            first.keys.merge(part.keys)
        return first


def _first_pass(series: Series, start: int, stop: int, *, limits: bool, means: bool,
                max_block_bytes: int) -> _Partial:
    """Pass 1 of :func:`series_statistics` over the steps ``start:stop``."""
    total = np.zeros((series.ny, series.nx), dtype=np.float64) if means else None
    count = np.zeros((series.ny, series.nx), dtype=np.int64) if means else None
    part = _Partial(total, count, np.inf, -np.inf, 0, True, None, _KeyCounts())
    if not limits:
        part.keys.dead = True
    for _, block in series.iter_blocks(start, stop, max_block_bytes):
        part.dtype = block.dtype
        finite = np.isfinite(block)
        if means:
            total += np.where(finite, block, 0.0).sum(axis=0, dtype=np.float64)
            count += finite.sum(axis=0)
        # A block without a gap (most fields) is used as it is: no copy of its values.
        vals = block.reshape(-1) if finite.all() else block[finite]
        if vals.size:
            part.n_finite += vals.size
            b_lo, b_hi = float(vals.min()), float(vals.max())
            part.lo, part.hi = min(part.lo, b_lo), max(part.hi, b_hi)
            part.integral = part.integral and bool(np.array_equal(vals, np.floor(vals)))
            part.keys.add(vals, b_lo, b_hi)
    return part


def _histogram(series: Series, start: int, stop: int, *, bins: _Bins,
               max_block_bytes: int) -> np.ndarray:
    """Pass 2 of :func:`series_statistics` over the steps ``start:stop``: bin counts."""
    hist = np.zeros(bins.n, dtype=np.int64)
    for _, block in series.iter_blocks(start, stop, max_block_bytes):
        hist += bins.histogram(block[np.isfinite(block)])
    return hist


def _in_worker(reopen, fn, start: int, stop: int, **kwargs):
    # A statistics worker process: its own series, opened as the job opened its own.
    with reopen() as series:
        return fn(series, start, stop, **kwargs)


def _ordered_keys(values: np.ndarray) -> np.ndarray:
    """Integers in the order of the floats `values`, consecutive floats one apart (int64).

    IEEE 754 bit patterns of non-negative floats already sort as integers; a negative
    float's key is minus its magnitude's pattern (so -0.0 and 0.0 share key 0).
    """
    itype = np.int32 if values.dtype == np.float32 else np.int64
    keys = values.view(itype).astype(np.int64)  # the one full-size temporary
    negative = keys < 0
    np.bitwise_and(keys, np.iinfo(itype).max, out=keys)
    np.negative(keys, out=keys, where=negative)
    return keys


def _from_key(key: int, dtype: np.dtype) -> float:
    """Return the float of `dtype` whose :func:`_ordered_keys` key is `key`."""
    itype = np.int32 if dtype == np.float32 else np.int64
    bits = np.array([abs(key)], dtype=np.int64).astype(itype)
    value = float(bits.view(np.float32 if dtype == np.float32 else np.float64)[0])
    return -value if key < 0 else value


class _KeyCounts:
    """How often each value of a float type occurs (pass 1 of :func:`series_statistics`).

    Counts over the keys (:func:`_ordered_keys`) from the smallest to the largest seen;
    given up (``counts`` None) once that span passes :data:`KEY_BINS_MAX` or the blocks
    change type.
    """

    def __init__(self):
        self.key0, self.counts, self.dtype, self.dead = 0, None, None, False

    def add(self, vals: np.ndarray, v_lo: float, v_hi: float) -> None:
        """Count the finite values `vals` (1-D, float32 or float64) within `v_lo`..`v_hi`.

        `v_lo` and `v_hi` are the smallest and largest of `vals`.
        """
        if self.dead:
            return
        ftype = np.dtype(np.float32) if vals.dtype == np.float32 else np.dtype(np.float64)
        if self.dtype is not None and ftype != self.dtype:
            self._give_up()
            return
        self.dtype = ftype
        # Keys are monotonic in the values: the extremes' keys bound the block's.
        k_lo, k_hi = (int(k) for k in _ordered_keys(np.array([v_lo, v_hi], dtype=ftype)))
        if self.counts is None:
            first, last = k_lo, k_hi
        else:
            first = min(k_lo, self.key0)
            last = max(k_hi, self.key0 + self.counts.size - 1)
        if last - first + 1 > KEY_BINS_MAX:
            self._give_up()
            return
        if self.counts is None or (first, last) != (
                self.key0, self.key0 + self.counts.size - 1):
            grown = np.zeros(last - first + 1, dtype=np.int64)
            if self.counts is not None:
                grown[self.key0 - first:self.key0 - first + self.counts.size] = self.counts
            self.key0, self.counts = first, grown
        at = k_lo - self.key0
        itype = np.int32 if ftype == np.float32 else np.int64
        for i in range(0, vals.size, KEY_SLICE):
            part = vals[i:i + KEY_SLICE].astype(ftype, copy=False)
            if v_lo > 0.0:
                # All positive: a key is the bit pattern itself, offset in one pass.
                offsets = np.subtract(part.view(itype), k_lo, dtype=np.intp)
            else:
                offsets = _ordered_keys(part)
                offsets -= k_lo
            self.counts[at:at + k_hi - k_lo + 1] += np.bincount(offsets,
                                                                minlength=k_hi - k_lo + 1)

    def merge(self, other: _KeyCounts) -> None:
        """Add the counts of `other` (the same or other values of the same float type).

        Given up when either was, their types differ, or their keys together span more
        than :data:`KEY_BINS_MAX`: as one :meth:`add` of all their values would be.
        """
        if self.dead or other.counts is None:
            if other.dead:
                self._give_up()
            return
        if self.counts is None:
            self.key0, self.counts, self.dtype = other.key0, other.counts, other.dtype
            return
        if other.dtype != self.dtype:
            self._give_up()
            return
        first = min(self.key0, other.key0)
        last = max(self.key0 + self.counts.size, other.key0 + other.counts.size) - 1
        if last - first + 1 > KEY_BINS_MAX:
            self._give_up()
            return
        grown = np.zeros(last - first + 1, dtype=np.int64)
        grown[self.key0 - first:self.key0 - first + self.counts.size] = self.counts
        grown[other.key0 - first:other.key0 - first + other.counts.size] += other.counts
        self.key0, self.counts = first, grown

    def _give_up(self) -> None:
        self.dead, self.counts = True, None


class _Bins:
    """The histogram bins of :func:`series_statistics` (see there for the three kinds)."""

    def __init__(self, kind: str, lo: float, hi: float, n: int, dtype: np.dtype,
                 key0: int = 0):
        self.kind, self.lo, self.hi, self.n, self.dtype, self.key0 = (
            kind, lo, hi, n, dtype, key0)
        self.width = (hi - lo) / n

    @classmethod
    def choose(cls, lo: float, hi: float, dtype: np.dtype, integral: bool) -> _Bins:
        ftype = np.dtype(np.float32) if dtype == np.float32 else np.dtype(np.float64)
        # Python ints: the keys of float64s either side of zero are 2**63 apart and more.
        first, last = (int(k) for k in _ordered_keys(np.array([lo, hi], dtype=ftype)))
        if last - first < N_BINS:
            return cls("values", lo, hi, last - first + 1, ftype, first)
        if integral and hi - lo < N_BINS:
            return cls("integers", lo, hi, int(hi - lo) + 1, ftype)
        return cls("linear", lo, hi, N_BINS, ftype)

    def histogram(self, vals: np.ndarray) -> np.ndarray:
        """Count finite `vals` (1-D) in each bin, shape ``(n,)`` int64."""
        if self.kind == "values":
            index = _ordered_keys(vals.astype(self.dtype, copy=False))
            index -= self.key0
        elif self.kind == "integers":
            # Bin edges halfway between integers: each whole number alone in its bin.
            return np.histogram(vals, bins=self.n, range=(self.lo - 0.5, self.hi + 0.5))[0]
        else:
            # float64 edges: float32 edges cannot split a range narrower than N_BINS steps.
            return np.histogram(vals.astype(np.float64, copy=False), bins=self.n,
                                range=(self.lo, self.hi))[0]
        return np.bincount(index, minlength=self.n)

    def value(self, i: int, position: float) -> float:
        """Return the value at `position` (0..1, order within the bin) of bin `i`."""
        if self.kind == "values":
            return _from_key(self.key0 + i, self.dtype)
        if self.kind == "integers":
            return self.lo + i
        return self.lo + (i + position) * self.width


def _percentile(hist: np.ndarray, bins: _Bins, q: float) -> float:
    # numpy.percentile's default 'linear' method: rank q/100 * (n - 1) between the
    # order statistics x[floor(rank)] and x[floor(rank) + 1].
    cum = np.cumsum(hist)
    rank = q / 100.0 * (cum[-1] - 1)
    k = int(np.floor(rank))

    def order_statistic(k: int) -> float:
        i = int(np.searchsorted(cum, k, side="right"))  # bin holding x[k]
        before = int(cum[i - 1]) if i > 0 else 0
        return bins.value(i, (k - before + 0.5) / hist[i])

    low = order_statistic(k)
    if k + 1 > cum[-1] - 1 or rank == k:
        return float(low)
    return float(low + (rank - k) * (order_statistic(k + 1) - low))


def nonsingular_range(vmin: float, vmax: float) -> tuple[float, float]:
    """Return a colour range with ``vmin < vmax`` around a constant (or reversed) one.

    A constant range becomes 5 % of the value either side (``-0.05..0.05`` around zero),
    matplotlib's margin for a singular axis, so a constant field is drawn in the middle
    colour and the colour bar gets round ticks; a reversed range is swapped.

    Parameters
    ----------
    vmin, vmax : float
        Finite limits, variable units.

    Returns
    -------
    (float, float)
        Finite limits with ``vmin < vmax``.
    """
    lo, hi = sorted((float(vmin), float(vmax)))
    if lo < hi:
        return lo, hi
    margin = 0.05 * abs(lo) or 0.05
    return lo - margin, hi + margin


def colour_range(lo: float, hi: float, vmin: float | None = None,
                 vmax: float | None = None) -> tuple[float, float, str | None]:
    """Return the movie's colour range from computed percentiles and configured limits.

    Configured `vmin`/`vmax` override the computed `lo`/`hi` (each independently). A range
    that would be empty is widened (:func:`nonsingular_range`) around the configured (else
    the computed) value; no finite limit at all gives ``0..1``.

    Parameters
    ----------
    lo, hi : float
        Computed lower and upper percentiles (variable units; NaN when the series has no
        finite value).
    vmin, vmax : float, optional
        Config ``vmin`` and ``vmax`` (None: computed).

    Returns
    -------
    (float, float, str or None)
        Finite ``vmin < vmax`` and, when they are not the percentiles or configured
        values, why (``stats.json``'s ``widened``), else None.
    """
    if vmin is not None:
        lo = float(vmin)
    if vmax is not None:
        hi = float(vmax)
    if not (np.isfinite(lo) or np.isfinite(hi)):
        return 0.0, 1.0, "no finite value in the series: 0..1"
    if np.isfinite(lo) and np.isfinite(hi) and lo < hi:
        return float(lo), float(hi), None
    # A constant field, no data beside one configured limit, or a configured limit beyond
    # the other, computed one: widen around the configured (else the) value.
    centre = vmax if vmax is not None else (vmin if vmin is not None else lo)
    wide = nonsingular_range(centre, centre)
    lo = float(vmin) if vmin is not None else wide[0]
    hi = float(vmax) if vmax is not None else wide[1]
    return lo, hi, (f"widened 5 % around {centre:.6g}: " + (
        "a constant field" if vmin is None and vmax is None
        else "the configured limit leaves no room for the computed other"))


def _overlay_and_panel_limits(series: Series, overlays: dict | None, panels: dict | None,
                              *, percentiles: tuple[float, float],
                              n_time: int | None = None) -> dict:
    # The movie's fixed overlay levels and scale, or each panel's limits (with panels each
    # panel's overlays have their own levels and scale), over its first n_time steps.
    out = {}
    if not panels and overlays and (overlays.get("contours") or overlays.get("vectors")):
        from ncreel.render.overlays import overlay_limits

        out["overlays"] = overlay_limits(series, overlays.get("contours"),
                                         overlays.get("vectors"), n_time=n_time)
    if panels:
        out["panels"] = panel_statistics(
            panels, series.n_time if n_time is None else n_time, percentiles=percentiles,
            warn=n_time is None)
    return out


def _refuse_empty(series: Series, movie_finite: int | None, table_finite: int | None):
    # A selection without one value would make a blank movie or an empty table, and a run
    # that "succeeds" with them is silently wrong: one line instead.
    empty = [what for what, n in (("the movie would be blank", movie_finite),
                                  ("the table would have no row", table_finite)) if n == 0]
    if empty:
        raise NcreelError(
            f"'{series.variable}' of {series.paths[0]} has no value (all missing) in the "
            f"{series.n_time} step(s) and the cells this run shows, so "
            f"{' and '.join(empty)}: choose other steps (time_range), a region or "
            "cells.region with data, or check the variable's _FillValue and missing_value")


def probe_statistics(series: Series, n_steps: int, *, vmin: float | None = None,
                     vmax: float | None = None, percentiles=(2.0, 98.0),
                     overlays: dict | None = None, panels: dict | None = None) -> dict:
    """Colour limits of the first `n_steps` steps: what ``calibrate_render`` draws with.

    The calibration measures a frame's memory and time, which do not depend on where the
    colour limits lie, so it need not wait for the statistics pass over the whole series
    (:func:`write_statistics`) and runs beside it. Its limits are those of a few steps,
    computed as the statistics pass does (percentiles, configured limits, widening; overlay
    levels and panel limits of those steps): the same kind of frame, drawn with the same
    number of contour levels and colour-bar arrows as the movie's frames are in most runs.

    Parameters
    ----------
    series : Series
        The movie's series, shape ``(n_time, ny, nx)``.
    n_steps : int
        Steps to take, from the first (at most ``n_time``; at least 1).
    vmin, vmax, percentiles, overlays, panels
        As for :func:`write_statistics`.

    Returns
    -------
    dict
        ``vmin``, ``vmax``, ``min``, ``max``, ``widened``, ``probe_steps`` and, with
        overlays or panels, ``overlays`` or ``panels`` (as in ``stats.json``).
    """
    n = max(1, min(int(n_steps), series.n_time))
    block = series.read(0, n)
    vals = block[np.isfinite(block)]
    if vals.size:
        lo, hi = (float(v) for v in np.percentile(vals, percentiles))
        low, high = float(vals.min()), float(vals.max())
    else:
        lo = hi = float("nan")
        low = high = None
    lo, hi, widened = colour_range(lo, hi, vmin, vmax)
    return {"vmin": lo, "vmax": hi, "min": low, "max": high, "widened": widened,
            "probe_steps": n,
            **_overlay_and_panel_limits(series, overlays, panels,
                                        percentiles=tuple(percentiles), n_time=n)}


def write_statistics(series: Series, stats_json: str | os.PathLike,
                     cell_mean_npy: str | os.PathLike | None, *, vmin: float | None = None,
                     vmax: float | None = None, percentiles=(2.0, 98.0),
                     limits_series: Series | None = None,
                     overlays: dict | None = None, panels: dict | None = None,
                     outputs=("movie", "table"), selection=None, workers: int = 1) -> dict:
    """Compute :func:`series_statistics` and write ``stats.json`` and ``cell_mean.npy``.

    Only what `outputs` (config ``outputs``) need: the colour limits, overlay levels and
    panel limits for ``movie``; the cell means (`cell_mean_npy`, else None) for
    ``table``. Without a movie ``vmin``/``vmax`` are None; ``stats.json`` records
    ``outputs``.

    Configured `vmin`/`vmax` override the computed percentiles (each independently). A
    range that would be empty is widened (:func:`nonsingular_range`); ``widened`` in the
    result then says how and why (else None).

    ``stats.json`` also records each input's identity (``inputs``, see
    :mod:`ncreel.input.identity`), taken before the pass and checked again after it, so later jobs
    can tell whether the files they read are the ones these statistics describe.

    `limits_series`, when given, is what the movie shows (a region of `series`, whose
    cells the table has): the colour limits and value statistics are its, the cell means
    `series`'. `overlays` (config ``contours`` and ``vectors``) adds their fixed levels
    and scale as ``overlays`` (:func:`ncreel.render.overlays.overlay_limits`). `panels`
    (a planned ``panels`` layout, :func:`ncreel.render.panelplan.plan_panels`) adds each panel's
    colour limits as ``panels`` (:func:`ncreel.render.panelplan.panel_statistics`).

    With `selection` (the :class:`ncreel.config.settings.SeriesSelection` that `series`
    and `limits_series` were opened from) and `workers` > 1, the passes over `series` and
    `limits_series` are read by that many worker processes at once (see
    :func:`series_statistics`); the panels' and overlays' own passes stay in this process.

    Returns
    -------
    dict
        The statistics written to `stats_json`.

    Raises
    ------
    NcreelError
        If an input changed while it was being read, or when the steps and cells the
        run shows hold no value at all (a blank movie, an empty table).
    """
    paths = list(series.paths)
    if panels:  # the panels' files: the limits below describe them too
        paths += [q for p in panels["panels"] if p["series"] for q in p["series"]["paths"]
                  if q not in paths]
    inputs = input_identities(list(dict.fromkeys(paths)))
    time = series.time_axis()
    if not time.decoded:
        log.warning("time of '%s' not decoded, using the raw '%s' values instead "
                    "(column time is NULL, time_value holds them): %s", series.variable,
                    series.time_dim, time.note)
    elif time.note:
        log.warning("time of '%s' not decoded for some steps (column time is NULL there): %s",
                    series.variable, time.note)
    movie = "movie" in outputs
    reopen = reopen_limits = None
    if selection is not None:  # worker processes open what this process opened
        reopen = functools.partial(open_selection, selection.table_selection()
                                   if "table" in outputs else selection)
        reopen_limits = functools.partial(open_selection, selection)
    stats, cell_mean = series_statistics(series, percentiles=tuple(percentiles),
                                         limits=movie and limits_series is None,
                                         means=cell_mean_npy is not None,
                                         workers=workers, reopen=reopen)
    table_finite = stats["n_finite"]
    if limits_series is not None:
        stats = {**series_statistics(limits_series, percentiles=tuple(percentiles),
                                     limits=movie, means=False, workers=workers,
                                     reopen=reopen_limits)[0],
                 "table_ny": stats["ny"], "table_nx": stats["nx"]}
    _refuse_empty(series, stats["n_finite"] if movie else None,
                  table_finite if cell_mean_npy is not None else None)
    stats["time_decoded"] = time.decoded
    stats["outputs"] = list(outputs)
    widened = None  # why the limits are not the percentiles / configured values
    if movie:  # else no colour limits: no frame is drawn
        lo, hi, widened = colour_range(stats["vmin"], stats["vmax"], vmin, vmax)
        if widened and widened.startswith("no finite"):
            log.warning("%s: no finite values in '%s'; colour range set to 0..1",
                        series.paths[0], series.variable)
        elif widened and (vmin is not None or vmax is not None):
            log.warning("configured %s leaves no room for the computed other limit: colour "
                        "range %.6g..%.6g (set both vmin and vmax to choose it)",
                        "vmin" if vmin is not None else "vmax", lo, hi)
        stats["vmin"], stats["vmax"] = lo, hi
    stats["widened"] = widened
    if movie:
        stats.update(_overlay_and_panel_limits(limits_series or series, overlays, panels,
                                               percentiles=tuple(percentiles)))
    check_inputs(inputs)  # a file replaced during the pass: these statistics mix versions
    stats["inputs"] = inputs
    if cell_mean_npy is not None:
        with atomic_path(cell_mean_npy) as tmp, open(tmp, "wb") as fh:
            np.save(fh, cell_mean)
    with atomic_path(stats_json) as tmp:
        tmp.write_text(json.dumps(stats, indent=2) + "\n")
    if movie:
        log.info("colour range %.6g..%.6g from %d finite values", stats["vmin"],
                 stats["vmax"], stats["n_finite"])
    else:
        log.info("cell means of %d finite values (no movie: no colour limits)",
                 stats["n_finite"])
    return stats


def panel_statistics(layout: dict, n_time: int, *, percentiles=(2.0, 98.0),
                     warn: bool = True) -> list[dict]:
    """Colour limits of every panel over the movie's `n_time` steps (the statistics pass).

    A panel's limits are its 2nd and 98th percentiles (:func:`ncreel.jobs.stats.series_statistics`)
    unless configured; a difference panel's are symmetric about zero, ``-m .. m`` with `m`
    the larger magnitude of its percentiles (so zero is the colormap's centre). An empty
    range is widened (:func:`ncreel.jobs.stats.nonsingular_range`).

    Returns
    -------
    list of dict
        One per panel: ``vmin``, ``vmax``, ``min``, ``max`` (the panel's units) and, for a
        panel with contours or vectors, ``overlays``
        (:func:`ncreel.render.overlays.overlay_limits` over the movie's steps of its file).
    warn : bool
        Say which contour levels no frame reaches (False for the few steps of
        :func:`probe_statistics`).
    """
    from ncreel.render.panelplan import PanelReader

    out = []
    with PanelReader(layout) as reader:
        for i, p in enumerate(reader.panels):
            stats, _ = series_statistics(reader.panel_view(i, n_time),
                                         percentiles=tuple(percentiles), means=False)
            lo, hi = stats["vmin"], stats["vmax"]
            if p["difference_of"] is not None and np.isfinite(lo) and np.isfinite(hi):
                m = max(abs(lo), abs(hi))
                lo, hi = -m, m
            if p["vmin"] is not None:
                lo = float(p["vmin"])
            if p["vmax"] is not None:
                hi = float(p["vmax"])
            if np.isfinite(lo) and np.isfinite(hi):
                lo, hi = nonsingular_range(lo, hi)
            else:  # no finite value: 0..1, as for a single field
                lo, hi = 0.0, 1.0
            out.append({"vmin": float(lo), "vmax": float(hi), "min": stats["min"],
                        "max": stats["max"]})
            if p.get("contours") or p.get("vectors"):
                from ncreel.render.overlays import overlay_limits

                # Levels and scale of this panel's overlays over the movie's steps (a
                # warning about levels no frame crosses follows this line in the log).
                if warn:
                    log.info("panels[%d]: overlay levels and scale from %s", i,
                             ", ".join(p["series"]["paths"]))
                out[-1]["overlays"] = overlay_limits(reader.overlay_view(i, n_time),
                                                     p.get("contours"), p.get("vectors"),
                                                     warn=warn)
    return out
