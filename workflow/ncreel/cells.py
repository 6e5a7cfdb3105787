"""Per-cell result rows: one row per time step x finite grid cell, computed per block.

A *cell model* turns one block ``(time, y, x)`` into typed columns. The built-in
``field`` model writes the value, its anomaly and the cell's position.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ncreel.source import TimeAxis


@dataclass(frozen=True)
class CellContext:
    """What a cell model may use besides the block itself.

    Attributes
    ----------
    time : TimeAxis
        The whole series' time axis (index it with global time indices).
    cell_mean : numpy.ndarray, shape (ny, nx), float64
        Mean of each cell over the whole series (NaN if never finite).
    lat, lon : numpy.ndarray, shape (ny, nx), float64, degrees; or None
        Cell-centre coordinates when the grid has them.
    value_type : str
        PostgreSQL type of the variable's values (``real`` or ``double precision``).
    """

    time: TimeAxis
    cell_mean: np.ndarray
    lat: np.ndarray | None
    lon: np.ndarray | None
    value_type: str = "real"


def field_columns(ctx: CellContext) -> list[tuple[str, str]]:
    """Column names and PostgreSQL types written by :func:`field_model`, in order."""
    return [
        ("time_index", "integer"),
        ("time", ctx.time.postgres_type),
        ("time_value", "double precision"),
        ("cell_id", "bigint"),
        ("lat", "double precision"),
        ("lon", "double precision"),
        ("value", ctx.value_type),
        ("anomaly", "double precision"),
    ]


def field_model(block: np.ndarray, t0: int, ctx: CellContext) -> dict[str, object]:
    """Compute the default ``field`` model: value and anomaly of each finite cell and step.

    Parameters
    ----------
    block : numpy.ndarray, shape (n_t, ny, nx)
        Values for global time indices ``t0 : t0 + n_t``, NaN where missing.
    t0 : int
        Global index of the block's first time step.
    ctx : CellContext
        Series-wide context.

    Returns
    -------
    dict of str to numpy.ndarray, each of shape (n_rows,)
        Columns of :func:`field_columns`, rows ordered by time then ``cell_id``
        (row-major ``iy * nx + ix``). ``anomaly = value - cell_mean`` (float64).
        Cells whose value is NaN (``_FillValue``/``missing_value``) give no row.
    """
    n_t, ny, nx = block.shape
    flat = block.reshape(n_t, ny * nx)
    t_local, cell = np.nonzero(np.isfinite(flat))
    value = flat[t_local, cell]
    t_global = t_local + t0
    labels = ctx.time.labels
    if ctx.time.decoded:
        step_labels = np.asarray(labels[t0:t0 + n_t], dtype=object)
        time_col = step_labels[t_local]
    else:
        time_col = np.full(len(t_local), None, dtype=object)
    lat = ctx.lat.reshape(-1)[cell] if ctx.lat is not None else np.full(len(cell), np.nan)
    lon = ctx.lon.reshape(-1)[cell] if ctx.lon is not None else np.full(len(cell), np.nan)
    return {
        "time_index": t_global.astype(np.int32),
        "time": time_col,
        "time_value": ctx.time.values[t_global],
        "cell_id": cell.astype(np.int64),
        "lat": lat,
        "lon": lon,
        "value": value,
        "anomaly": value.astype(np.float64) - ctx.cell_mean.reshape(-1)[cell],
    }
