"""The cell-model contract: the context a model is handed, and its column declaration.

:class:`CellContext` is what every model call receives; :func:`cell_model` attaches the
column declaration the reduce rule reads at parse time.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from ncreel.input.timeaxis import TimeAxis
from ncreel.pg.types import GEOMETRY_COLUMN, RUN_COLUMN

__all__ = ["GEOMETRY_COLUMN", "RUN_COLUMN", "CellContext", "cell_model"]


@dataclass(frozen=True)
class CellContext:
    """What a cell model may use besides the block itself.

    Attributes
    ----------
    time : TimeAxis
        The whole series' time axis (index it with global time indices).
    cell_mean : numpy.ndarray, shape (ny, nx), float64
        Mean of each cell over the steps the run shows (config ``time_range``,
        ``time_every``; NaN if never finite). Empty, shape (0,),
        when ``columns`` is called at parse time.
    lat, lon : numpy.ndarray, shape (ny, nx), float64, degrees; or None
        Cell-centre coordinates when the grid has them, ``lon`` in EPSG:4326's
        [-180, 180) (:func:`ncreel.cells.geometry.fold_longitude`).
    value_type : str
        PostgreSQL type of the variable's values (``real`` or ``double precision``).
    variable : str
        Name of the series' data variable.
    read_variable : callable or None
        ``read_variable(name, start, stop)`` returns another variable of the same files
        for global time steps ``start:stop`` as float, shape ``(stop - start, ny, nx)``
        (or ``(ny, nx)`` if it has no time dimension), NaN where missing. None at parse time.
    state : dict
        Pre-pass results by name, and a per-shard cache of the model.
    lon_raw : numpy.ndarray, shape (ny, nx), float64, degrees; or None
        Cell-centre longitude as the file stores it (e.g. 0…360), or as computed from its
        grid mapping; None when the grid has no longitude, or when not given (then
        models use ``lon``).
    """

    time: TimeAxis
    cell_mean: np.ndarray
    lat: np.ndarray | None
    lon: np.ndarray | None
    value_type: str = "real"
    variable: str = ""
    read_variable: Callable[[str, int, int], np.ndarray] | None = field(default=None,
                                                                        repr=False)
    #: Per-run inputs from pre-passes (e.g. ``degradation``: the soil degradation state
    #: of :func:`ncreel.cells.soil.degradation_prepass`), and a cache a model may fill while it
    #: is called on a shard's blocks in order.
    state: dict = field(default_factory=dict, repr=False)
    lon_raw: np.ndarray | None = None


def cell_model(*, columns: Callable[..., Sequence[tuple[str, str]]]):
    """Decorate a cell-model function with its column declaration.

    Parameters
    ----------
    columns : callable
        ``columns(ctx, **params) -> [(name, pgtype), ...]``.

    Returns
    -------
    callable
        Decorator returning the function itself with ``columns`` attached.
    """
    def wrap(fn):
        fn.columns = columns
        return fn
    return wrap
