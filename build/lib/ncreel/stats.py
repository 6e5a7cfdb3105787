"""Series-wide statistics streamed over time blocks: colour limits and per-cell means."""

from __future__ import annotations

import json
import logging
import os

import numpy as np

from ncreel.identity import check_inputs, input_identities
from ncreel.io import atomic_path
from ncreel.source import BLOCK_BYTES, Series

log = logging.getLogger(__name__)

#: Histogram bins used for the streamed percentiles; the error is at most (max-min)/N_BINS.
N_BINS = 1 << 16


def series_statistics(series: Series, *, percentiles: tuple[float, float] = (2.0, 98.0),
                      max_block_bytes: int = BLOCK_BYTES) -> tuple[dict, np.ndarray]:
    """Compute colour limits and each cell's time mean in two streamed passes.

    Pass 1 accumulates per-cell sums and counts (float64) and the global min/max; pass 2
    fills a fixed-range histogram of ``N_BINS`` bins, from which the percentiles are read
    with linear interpolation inside the bin. Memory is one block plus ``(ny, nx)``
    accumulators, whatever the series length.

    Parameters
    ----------
    series : Series
        Opened series of shape ``(n_time, ny, nx)``.
    percentiles : (float, float)
        Lower and upper percentile (0-100) for the robust colour range.
    max_block_bytes : int
        Bound on the size of one block read from disk.

    Returns
    -------
    stats : dict
        ``vmin``, ``vmax`` (variable units; the percentiles, accurate to
        ``(max - min) / N_BINS``), ``min``, ``max``, ``n_finite``, ``n_time``, ``ny``, ``nx``.
    cell_mean : numpy.ndarray, shape (ny, nx), float64
        Mean over time of each cell's finite values; NaN where a cell is never finite.
    """
    total = np.zeros((series.ny, series.nx), dtype=np.float64)
    count = np.zeros((series.ny, series.nx), dtype=np.int64)
    lo, hi = np.inf, -np.inf
    for _, block in series.iter_blocks(0, series.n_time, max_block_bytes):
        finite = np.isfinite(block)
        total += np.where(finite, block, 0.0).sum(axis=0, dtype=np.float64)
        count += finite.sum(axis=0)
        if finite.any():
            vals = block[finite]
            lo, hi = min(lo, float(vals.min())), max(hi, float(vals.max()))
    with np.errstate(invalid="ignore", divide="ignore"):
        cell_mean = np.where(count > 0, total / np.maximum(count, 1), np.nan)
    n_finite = int(count.sum())
    if n_finite == 0:
        vmin = vmax = float("nan")
    elif lo == hi:
        vmin = vmax = lo
    else:
        hist = np.zeros(N_BINS, dtype=np.int64)
        for _, block in series.iter_blocks(0, series.n_time, max_block_bytes):
            vals = block[np.isfinite(block)]
            hist += np.histogram(vals, bins=N_BINS, range=(lo, hi))[0]
        vmin, vmax = (_hist_percentile(hist, lo, hi, p) for p in percentiles)
    stats = {"vmin": vmin, "vmax": vmax, "min": lo if n_finite else None,
             "max": hi if n_finite else None, "percentiles": list(percentiles),
             "n_finite": n_finite, "n_time": series.n_time, "ny": series.ny, "nx": series.nx}
    return stats, cell_mean


def _hist_percentile(hist: np.ndarray, lo: float, hi: float, q: float) -> float:
    # Same definition as numpy.percentile's default 'linear' method, applied to binned data.
    cum = np.cumsum(hist)
    rank = q / 100.0 * (cum[-1] - 1)
    i = int(np.searchsorted(cum, rank, side="right"))
    before = cum[i - 1] if i > 0 else 0
    frac = (rank - before + 0.5) / max(hist[i], 1)
    width = (hi - lo) / len(hist)
    return float(lo + (i + min(max(frac, 0.0), 1.0)) * width)


def write_statistics(series: Series, stats_json: str | os.PathLike,
                     cell_mean_npy: str | os.PathLike, *, vmin: float | None = None,
                     vmax: float | None = None, percentiles=(2.0, 98.0)) -> dict:
    """Compute :func:`series_statistics` and write ``stats.json`` and ``cell_mean.npy``.

    Configured `vmin`/`vmax` override the computed percentiles (each independently).

    ``stats.json`` also records each input's identity (``inputs``, see
    :mod:`ncreel.identity`), taken before the pass and checked again after it, so later jobs
    can tell whether the files they read are the ones these statistics describe.

    Returns
    -------
    dict
        The statistics written to `stats_json`.

    Raises
    ------
    NcreelError
        If an input changed while it was being read.
    """
    inputs = input_identities(series.paths)
    time = series.time_axis()
    if not time.decoded:
        log.warning("time of '%s' not decoded, using the raw '%s' values instead "
                    "(column time is NULL, time_value holds them): %s", series.variable,
                    series.time_dim, time.note)
    elif time.note:
        log.warning("time of '%s' not decoded for some steps (column time is NULL there): %s",
                    series.variable, time.note)
    stats, cell_mean = series_statistics(series, percentiles=tuple(percentiles))
    stats["time_decoded"] = time.decoded
    if vmin is not None:
        stats["vmin"] = float(vmin)
    if vmax is not None:
        stats["vmax"] = float(vmax)
    if not (np.isfinite(stats["vmin"]) and np.isfinite(stats["vmax"])):
        stats["vmin"], stats["vmax"] = 0.0, 1.0
        log.warning("%s: no finite values in '%s'; colour range set to 0..1",
                    series.paths[0], series.variable)
    if stats["vmin"] >= stats["vmax"]:
        # A constant field still needs a non-empty colour range.
        stats["vmax"] = stats["vmin"] + (abs(stats["vmin"]) * 1e-6 or 1.0)
    check_inputs(inputs)  # a file replaced during the pass: these statistics mix versions
    stats["inputs"] = inputs
    with atomic_path(cell_mean_npy) as tmp, open(tmp, "wb") as fh:
        np.save(fh, cell_mean)
    with atomic_path(stats_json) as tmp:
        tmp.write_text(json.dumps(stats, indent=2) + "\n")
    log.info("colour range %.6g..%.6g from %d finite values", stats["vmin"], stats["vmax"],
             stats["n_finite"])
    return stats
