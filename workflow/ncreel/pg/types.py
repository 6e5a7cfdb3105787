"""PostgreSQL column types: every type ncreel itself decides, in one place.

A cell model declares its own columns' types (:mod:`ncreel.cells`); the types that follow
from the data, not from a model, are decided here: the series' values, the ``time`` column
(``timestamp`` or ``text``, by calendar), array columns and the cell geometry. Imports
numpy only, so the parse-time column declaration stays light.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np

TIMESTAMP = "timestamp without time zone"

#: Column name the load step adds to every table (the run's name); models may not use it.
RUN_COLUMN = "run"
#: Name of the optional polygon column appended when ``cells.geometry`` is not ``none``.
GEOMETRY_COLUMN = "geom"

#: Name of the cell-area column of the normalised layout's cells table (CF standard name
#: ``cell_area``, m²), present with the polygon column.
AREA_COLUMN = "cell_area"
#: Columns that describe a cell alone, not a (step, cell): the normalised layout
#: (:mod:`ncreel.pg.layout`) keeps them once per cell in ``<table>_cells``. A column a
#: model or region adds per cell (e.g. its covered fraction) belongs here.
#: Columns added after the model's for a polygon region (:mod:`ncreel.region.polygon`):
#: the cell's covered fraction (1) and its centre's distance to the region's edge (m).
REGION_COLUMNS = (("covered_fraction", "double precision"),
                  ("edge_distance_m", "double precision"))
CELL_ATTRIBUTES = ("lat", "lon", "lon_raw", GEOMETRY_COLUMN, AREA_COLUMN,
                   *(name for name, _ in REGION_COLUMNS))
#: Columns that describe a time step alone: kept once per step in ``<table>_steps``.
STEP_ATTRIBUTES = ("time", "time_value")

#: numpy dtype → PostgreSQL type that holds it exactly.
NUMPY_TYPES = {
    np.dtype(np.float32): "real",
    np.dtype(np.float64): "double precision",
    np.dtype(np.int16): "smallint",
    np.dtype(np.int32): "integer",
    np.dtype(np.int64): "bigint",
    np.dtype(np.bool_): "boolean",
}

#: Geometry column type by config ``cells.geometry``. PostGIS: WGS 84 multipolygons for
#: every grid kind, so a cell split at the antimeridian and an ordinary cell have one
#: type (one layer in QGIS, one shapefile/GeoPackage geometry type on export).
GEOMETRY_TYPES = {"text": "text", "postgis": "geometry(MultiPolygon, 4326)"}

#: CF calendars that PostgreSQL's proleptic-Gregorian ``timestamp`` type can hold exactly.
GREGORIAN_CALENDARS = {"standard", "gregorian", "proleptic_gregorian"}


def pg_type_for(values) -> str:
    """PostgreSQL type that holds `values` exactly.

    Parameters
    ----------
    values : numpy.ndarray or sequence
        A column: numeric/bool ndarray, or strings (``text``).

    Returns
    -------
    str
        ``real`` for float32, ``double precision`` for float64, ``smallint``/``integer``/
        ``bigint`` for int16/32/64, ``boolean``, ``timestamp without time zone`` for
        datetime64, else ``text``.
    """
    arr = np.asarray(values) if not isinstance(values, np.ndarray) else values
    if arr.dtype.kind == "M":
        return TIMESTAMP
    return NUMPY_TYPES.get(arr.dtype, "text")


def value_type(dtype) -> str:
    """PostgreSQL type of the series' values: ``real`` for float32, else ``double precision``."""
    return "real" if np.dtype(dtype) == np.float32 else "double precision"


def time_type(labels: Sequence[str | None], calendar: str, *, decoded: bool) -> str:
    """PostgreSQL type for the ``time`` column of a CF time axis.

    ``timestamp`` holds only proleptic Gregorian dates of years 1 to 9999 here (ISO 8601
    text with a four-digit year); 360-day, noleap and other CF calendars have dates such
    as 2000-02-30 that it rejects, CF ``standard`` dates before 1582-10-15 are Julian,
    and year 0, negative or five-digit years do not parse, so all those are ``text``
    (ISO 8601 strings in the file's calendar). Every label then loads.

    Parameters
    ----------
    labels : sequence of str or None, length n_time
        ISO 8601 date-times in the data's calendar; None where a step has no time. May be
        empty (a declaration made before any data is read).
    calendar : str
        CF calendar name.
    decoded : bool
        False when the axis could not be decoded (raw values only).

    Returns
    -------
    str
        ``timestamp without time zone`` or ``text``.
    """
    present = [lab for lab in labels if lab is not None]
    if not decoded or calendar not in GREGORIAN_CALENDARS:
        return "text"
    if not all(re.match(r"\d{4}-", lab) and lab[:4] != "0000" for lab in present):
        return "text"
    # CF 'standard' is Julian before 1582-10-15; PostgreSQL is proleptic Gregorian.
    # An axis without labels (a model's column declaration made before any data is
    # read) has no Julian dates either.
    if calendar != "proleptic_gregorian" and present and min(present) < "1582-10-15":
        return "text"
    return TIMESTAMP
