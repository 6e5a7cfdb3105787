"""The default ``field`` model: value and anomaly of every cell at every time step."""

from __future__ import annotations

import numpy as np

from ncreel.cells.context import CellContext, cell_model


def _present_rows(block: np.ndarray, t0: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Local time index, flat cell index and value of every non-missing cell of `block`.

    NaN is missing (``_FillValue``/``missing_value`` decode to it) and gives no row;
    ``±inf`` is a value and is kept (COPY writes it as ``inf``/``-inf``).
    """
    n_t, ny, nx = block.shape
    flat = block.reshape(n_t, ny * nx)
    missing = np.isnan(flat)
    if not missing.any():  # most fields: every cell, in order, without a search
        cells = ny * nx
        return (np.repeat(np.arange(n_t), cells), np.tile(np.arange(cells), n_t),
                flat.reshape(-1))
    t_local, cell = np.nonzero(~missing)
    return t_local, cell, flat[t_local, cell]


def _time_column(ctx: CellContext, t0: int, n_t: int, t_local: np.ndarray):
    """``time`` column: one label per step, gathered per row without Python objects.

    Categorical: each row holds its step's code, not a copy of the label's text, and the
    COPY writer checks the few labels, not every row (:mod:`ncreel.pg.copytext`).
    """
    import polars as pl

    if not ctx.time.decoded:
        return pl.Series("time", [None], dtype=pl.Utf8).gather(np.zeros(len(t_local), np.int64))
    return pl.Series("time", ctx.time.labels[t0:t0 + n_t], dtype=pl.Categorical
                     ).gather(t_local)


def _position(ctx: CellContext, cell: np.ndarray
              ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``lat``, ``lon`` (-180…180) and ``lon_raw`` (as the file stores it) of each row's cell."""
    def gather(a):
        return a.reshape(-1)[cell] if a is not None else np.full(len(cell), np.nan)
    raw = ctx.lon_raw if ctx.lon_raw is not None else ctx.lon
    return gather(ctx.lat), gather(ctx.lon), gather(raw)


def field_columns(ctx: CellContext) -> list[tuple[str, str]]:
    """Column names and PostgreSQL types written by :func:`field_model`, in order."""
    return [
        ("time_index", "integer"),
        ("time", ctx.time.postgres_type),
        ("time_value", "double precision"),
        ("cell_id", "bigint"),
        ("lat", "double precision"),
        ("lon", "double precision"),
        ("lon_raw", "double precision"),
        ("value", ctx.value_type),
        ("anomaly", "double precision"),
    ]


@cell_model(columns=field_columns)
def field_model(block: np.ndarray, t0: int, ctx: CellContext) -> dict[str, object]:
    """Compute the default ``field`` model: value and anomaly of each non-missing cell and step.

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
    dict of str to array, each of length n_rows
        Columns of :func:`field_columns`, rows ordered by time then ``cell_id``
        (row-major ``iy * nx + ix``). ``anomaly = value - cell_mean`` (float64).
        Cells whose value is NaN (``_FillValue``/``missing_value``) give no row; ``±inf``
        values give rows (their anomaly is ``±inf``).
    """
    t_local, cell, value = _present_rows(block, t0)
    t_global = t_local + t0
    lat, lon, lon_raw = _position(ctx, cell)
    return {
        "time_index": t_global.astype(np.int32),
        "time": _time_column(ctx, t0, block.shape[0], t_local),
        "time_value": ctx.time.values[t_global],
        "cell_id": cell.astype(np.int64),
        "lat": lat,
        "lon": lon,
        "lon_raw": lon_raw,
        "value": value,
        "anomaly": value.astype(np.float64) - ctx.cell_mean.reshape(-1)[cell],
    }
