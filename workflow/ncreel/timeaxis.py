"""Time axis detection and decoding: which dimension is time and what its steps are.

CF time coordinates (``UNIT since DATE`` in the file's calendar, via cftime), ISO 8601
strings (:func:`parse_iso_date`, the package's one date parser) and the order of files by
their first time. Used by :mod:`ncreel.source` (and :mod:`ncreel.cells.soil` for dates in
the config).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass

import cftime
import numpy as np
import xarray as xr

from ncreel.cfaxes import _attr, _coordinates_attr, _is_spatial
from ncreel.errors import NcreelError
from ncreel.pg.types import time_type

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TimeAxis:
    """The time coordinate of a series.

    Attributes
    ----------
    values : numpy.ndarray, shape (n_time,), float64
        Raw numeric coordinate values as stored (``time_value`` column); NaN where absent
        (``_FillValue``/``missing_value``, or netCDF's default fill value of the stored
        type where the file declares none: steps never written).
    labels : list of str or None, length n_time
        ISO 8601 date-times in the data's calendar, or ``None`` where time could not be decoded.
    calendar : str
        CF calendar name (``"standard"`` if the attribute is missing).
    units : str
        CF units string as stored (may be empty).
    decoded : bool
        False when the units/calendar could not be decoded and raw values are used instead.
    note : str
        Why decoding fell back to raw values (empty when decoded).
    name : str
        The time coordinate variable (else the time dimension), for labels such as
        ``name = value units`` where time is not decoded.
    """

    values: np.ndarray
    labels: list
    calendar: str
    units: str
    decoded: bool
    note: str = ""
    name: str = ""

    @property
    def postgres_type(self) -> str:
        """PostgreSQL type for the ``time`` column (:func:`ncreel.pg.types.time_type`)."""
        return time_type(self.labels, self.calendar, decoded=self.decoded)


#: CF units of a time axis without a reference date (UDUNITS names), as in "hours" or
#: "Month" of files whose time is not CF-decodable: evidence of time all the same.
_TIME_UNITS = re.compile(r"(s|sec|secs|seconds?|min|mins|minutes?|h|hr|hrs|hours?|d|days?|"
                         r"weeks?|months?|mon|years?|yr|yrs|common_years?)")
#: Dimension names taken as time without CF attributes: time, Time, TIME, t, T, and
#: time_<suffix> / time<digits> (NEMO's time_counter, CMIP's time1).
_TIME_NAMES = re.compile(r"t|time(_\w+|\d+)?", re.IGNORECASE)


def _is_time(name: str, var, *, bare_units: bool = False) -> bool:
    """Whether `var` is a time coordinate by CF attributes (axis, standard_name, units).

    With `bare_units`, by units that are a time unit without a reference date only.
    """
    if var is None:
        return False
    units = _attr(var, "units")
    if bare_units:
        return _TIME_UNITS.fullmatch(units) is not None
    return (_attr(var, "axis") == "t" or _attr(var, "standard_name") == "time"
            or " since " in f" {units} ")


def detect_time_dim(ds: xr.Dataset, variable: str, time_dim: str | None = None,
                    select: Mapping | None = None, source: str = "") -> str:
    """Find the time dimension of `variable`; never a guess.

    In order: the configured `time_dim`; the one dimension with a CF time coordinate
    (``axis: T``, ``standard_name: time`` or units ``UNIT since DATE``), either its own
    coordinate variable or a 1-D variable along it named in the data variable's
    ``coordinates`` attribute (WRF's ``XTIME``); else the one with bare time units such
    as ``hours``; else the one dimension named ``time``, ``Time``, ``t`` (any case) or
    ``time_<suffix>``. Two candidates at the first step that has any are an error. A
    dimension in `select` is never time.

    Parameters
    ----------
    ds : xarray.Dataset
        Opened with ``decode_times=False``.
    variable : str
        Data variable name.
    time_dim : str, optional
        Configured name; must be one of the variable's dimensions.
    select : mapping, optional
        Extra dimensions fixed by index; they are never the time dimension.
    source : str
        File name used in error messages.

    Returns
    -------
    str
        The dimension name.

    Raises
    ------
    NcreelError
        If `time_dim` is not a dimension of the variable; if no dimension is a time axis
        by the rules above (a file without time, e.g. model levels only: the message says
        how to show another dimension as frames with ``time_dim``); if more than one is.
        The message lists the variable's dimensions.
    """
    da = ds[variable]
    dims = [str(d) for d in da.dims]
    select = dict(select or {})
    where = f"{source}: " if source else ""
    if time_dim:
        if time_dim not in dims:
            raise NcreelError(f"{where}config key 'time_dim': '{time_dim}' is not a dimension of "
                              f"'{variable}' (its dims: {', '.join(dims)})")
        return time_dim
    free = [d for d in dims if d not in select]
    listed = [ds.variables[n] for n in _coordinates_attr(da) if n in ds.variables]

    def cf(bare_units):
        return [d for d in free if _is_time(d, ds.variables.get(d), bare_units=bare_units)
                or any(tuple(v.dims) == (d,) and _is_time("", v, bare_units=bare_units)
                       for v in listed)]

    named = [d for d in free if _TIME_NAMES.fullmatch(d)]
    # Bare time units are weaker evidence: a forecast's lead time (`step`, hours) beside
    # its CF time.
    for found, how in ((cf(False), "with a CF time coordinate"),
                       (cf(True), "with time units"), (named, "named as time")):
        if len(found) == 1:
            return found[0]
        if len(found) > 1:
            raise NcreelError(f"{where}variable '{variable}': ambiguous time dimension, "
                              f"{len(found)} dims {how}: {', '.join(found)} (its dims: "
                              f"{', '.join(dims)}); set time_dim=NAME to the one that is time")
    others = [d for d in free if not _is_spatial(d, ds.variables.get(d))]
    example = f" (e.g. time_dim={others[0]})" if others else ""
    raise NcreelError(
        f"{where}variable '{variable}' has no time axis: none of its dims ({', '.join(dims)}) "
        "has a coordinate with CF axis T, standard_name time or time units, or is named "
        f"time; to show another dimension as frames set time_dim=NAME{example}, or choose "
        "a variable with a time dimension")


def _find_time(ds: xr.Dataset, da: xr.DataArray, tdim: str, given: str | None,
               where: str) -> str | None:
    """Name of the time coordinate variable along `tdim`, or None when there is none."""
    if given is not None:
        if tuple(ds[given].dims) != (tdim,):
            raise NcreelError(f"config key 'time': '{given}' has dims "
                              f"({', '.join(map(str, ds[given].dims))}); a time coordinate "
                              f"needs exactly ({tdim})")
        return given
    listed = _coordinates_attr(da)
    along = [str(n) for n in [*listed, *ds.variables]
             if n in ds.variables and tuple(ds[n].dims) == (tdim,)]
    # A CF time coordinate has units "UNIT since DATE" (CF 4.4). NEMO's time_counter
    # dimension coordinate may have none while the variable's `coordinates` attribute
    # names time_centered, which has them: prefer the one that decodes.
    numeric = [n for n in along if ds[n].dtype.kind in "fiu"]
    for n in sorted(numeric, key=lambda n: n != tdim):  # the dimension's own first
        if " since " in f" {_attr(ds[n], 'units')} ":
            return n
    if tdim in ds.variables:
        return tdim
    for n in numeric:
        if _is_time(n, ds[n]):
            return n
    for n in along:  # WRF's Times(Time, DateStrLen), joined into strings by xarray
        if ds[n].dtype.kind in "SUO" and ("time" in n.lower() or "date" in n.lower()):
            return n
    return None


#: ISO 8601 date[-time]: ``YYYY-MM-DD`` (any number of year digits, a sign for years before
#: 1), then optionally ``T``, ``_`` or a space and ``hh:mm[:ss[.fff]]``, then optionally UTC
#: as ``Z``, ``UTC`` or a zero offset. Other offsets are not UTC and do not match.
_ISO = re.compile(r"\s*(-?\d+)-(\d{1,2})-(\d{1,2})(?:[T _](\d{1,2}):(\d{1,2})"
                  r"(?::(\d{1,2})(?:\.\d*)?)?)?\s*(?:Z|UTC|[+-]00(?::?00)?)?\s*")
#: The accepted form, for messages.
ISO_FORM = "YYYY-MM-DD[THH:MM[:SS]]"


def iso_fields(text: str) -> tuple[int, int, int, int, int, int] | None:
    """Year, month, day, hour, minute, second of an ISO 8601 `text`; None if not that form.

    The one date syntax of the package (time strings in files, dates in the config): see
    :data:`_ISO`. Fractions of a second are dropped; missing time fields are 0. Whether
    the fields make a date depends on the calendar (:func:`parse_iso_date`).
    """
    m = _ISO.fullmatch(str(text))
    if m is None:
        return None
    year, month, day, hour, minute, second = (int(g or 0) for g in m.groups())
    return year, month, day, hour, minute, second


def parse_iso_date(text: str, calendar: str):
    """Parse ISO 8601 `text` (``T``, ``_`` or space before the time) as a date in `calendar`.

    Parameters
    ----------
    text : str
        As :func:`iso_fields` reads it.
    calendar : str
        CF calendar name (``standard``, ``noleap``, ``360_day``, ...).

    Returns
    -------
    cftime.datetime or None
        None when `text` is not of that form or not a date of `calendar` (e.g. day 30 of
        February in the standard calendar, day 29 in ``noleap``).
    """
    fields = iso_fields(text)
    if fields is None:
        return None
    try:
        return cftime.datetime(*fields, calendar=calendar)
    except (ValueError, TypeError):
        return None


def _file_dates(ds: xr.Dataset, time_name: str | None, count: int):
    """``(raw, dates, units, calendar, note)`` of one file's time coordinate."""
    if time_name is None or time_name not in ds.variables:
        return np.full(count, np.nan), [None] * count, "", "standard", "no time coordinate"
    var = ds[time_name]
    units = str(var.attrs.get("units", ""))
    calendar = str(var.attrs.get("calendar", "standard")).lower()
    values = np.asarray(var.values).reshape(-1)
    if values.dtype.kind in "SUO":
        texts = [v.decode("utf-8", "replace") if isinstance(v, bytes) else str(v)
                 for v in values]
        dates = [parse_iso_date(t, calendar) for t in texts]
        bad = sum(d is None for d in dates)
        note = f"{bad} of {count} '{time_name}' strings are not ISO 8601 dates" if bad else ""
        return np.full(count, np.nan), dates, units, calendar, note
    raw = values.astype(np.float64)
    # netCDF's default fill value marks steps never written; without a _FillValue
    # attribute xarray leaves it as a number (9.96921e+36 for doubles): a missing step.
    fill = _default_fill(var)
    if fill is not None:
        raw[raw == fill] = np.nan
    dates: list = [None] * count
    if not units or " since " not in f" {units.lower()} ":
        return raw, dates, units, calendar, (
            f"'{time_name}' units {units!r} are not CF 'UNIT since DATE' (set config key "
            "time=<name> to use another time coordinate of the file)")
    ok = np.isfinite(raw)
    try:
        decoded = np.atleast_1d(cftime.num2date(raw[ok], units, calendar=calendar,
                                                only_use_cftime_datetimes=True))
    except Exception as err:  # cftime raises ValueError/TypeError/… for many unit oddities
        return raw, dates, units, calendar, (f"cannot decode time units {units!r} calendar "
                                             f"{calendar!r} ({err})")
    for i, d in zip(np.flatnonzero(ok), decoded, strict=True):
        dates[i] = d
    note = "" if ok.all() else (f"{int((~ok).sum())} of {count} '{time_name}' values are "
                                "missing (fill values); those steps have no time")
    return raw, dates, units, calendar, note


def _default_fill(var: xr.Variable) -> float | None:
    """Return the netCDF default fill value of `var`'s stored type (float64), or None."""
    import netCDF4

    stored = np.dtype(var.encoding.get("dtype", var.dtype))
    key = f"{stored.kind}{stored.itemsize}"
    if key not in netCDF4.default_fillvals or stored.kind not in "fiu":
        return None
    return float(np.array(netCDF4.default_fillvals[key], dtype=stored))


def _time_order(file_dates: list, paths: list) -> list:
    """Order of the files by their first time (name order when that cannot be decided).

    `file_dates` holds each file's decoded dates (:func:`_file_dates`; None where not).
    """
    if len(file_dates) < 2:
        return list(range(len(file_dates)))
    firsts = []
    for dates in file_dates:
        dates = [d for d in dates if d is not None]
        firsts.append(min(dates) if dates else None)
    try:
        if None in firsts:
            raise TypeError("a file has no decodable time")
        return sorted(range(len(file_dates)), key=lambda i: firsts[i])
    except TypeError as err:  # also cftime dates of different calendars
        log.warning("input files joined in name order: %s (%s)", err, ", ".join(paths))
        return list(range(len(file_dates)))
