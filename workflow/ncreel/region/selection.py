"""Open what a rule's params select: the files, the variable, and the region.

Apart from :mod:`ncreel.input.source` because a region's series (:mod:`ncreel.region.spec`) is a
:class:`ncreel.input.source.Series` of its own: the module that opens both sits above them.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from ncreel.input.source import Series, open_series
from ncreel.region.restrict import restrict
from ncreel.region.spec import region_from_params


def open_selection(selection) -> Series:
    """Open a :class:`ncreel.config.settings.SeriesSelection` lazily, cut to its region.

    Parameters
    ----------
    selection : ncreel.config.settings.SeriesSelection
        Which files, variable and region, as a rule's params carry them.

    Returns
    -------
    ncreel.input.source.Series
        A context manager closing its files, ``shape == (n_time, ny, nx)``; a
        :class:`ncreel.region.restrict.RegionSeries` when the selection has a region.

    Raises
    ------
    NcreelError
        As :func:`ncreel.input.source.open_series` and :func:`ncreel.region.restrict.restrict`.
    """
    series = open_series(list(selection.paths), selection.variable,
                         time_dim=selection.time_dim, select=selection.select,
                         lat=selection.lat, lon=selection.lon, time=selection.time,
                         steps=selection.steps, window=selection.window)
    if selection.region is None:
        return series
    try:
        return restrict(series, region_from_params(selection.region))
    except BaseException:
        series.close()
        raise


@contextlib.contextmanager
def table_series(selection, series: Series) -> Iterator[Series]:
    """Yield the series the per-cell table reads, given `series` opened from `selection`.

    `series` itself, unless the table has its own extent
    (:meth:`ncreel.config.settings.SeriesSelection.table_selection`: config
    ``cells.region``, or a region with ``table: global``): then that, opened here and
    closed on leaving.

    Parameters
    ----------
    selection : ncreel.config.settings.SeriesSelection
    series : Series
        Opened from `selection` by :func:`open_selection`.
    """
    table = selection.table_selection()
    if table is selection:
        yield series
        return
    with open_selection(table) as whole:
        yield whole
