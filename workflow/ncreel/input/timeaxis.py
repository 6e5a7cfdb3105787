"""Time axis detection and decoding: which dimension is time and what its steps are.

CF time coordinates (``UNIT since DATE`` in the file's calendar, via cftime), absolute
time axes (``day as %Y%m%d.%f`` of ICON and ``cdo -a``: :func:`absolute_dates`), ISO 8601
strings (:func:`parse_iso_date`, the package's one date parser), the order of files by
their first time and of every step by its time (:func:`time_order`), and the steps config
``time_range``/``time_every`` show (:func:`time_window`). Used by
:mod:`ncreel.input.source` (and :mod:`ncreel.cells.soil` for dates in the config).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass

import cftime
import numpy as np
import xarray as xr

from ncreel.core.errors import NcreelError
from ncreel.input.cfaxes import _attr, _coordinates_attr, _is_spatial
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
            or " since " in f" {units} " or _ABSOLUTE.fullmatch(units) is not None)


#: Absolute time axes (CDO's ``-a`` option, ICON output): the value is the date itself,
#: ``YYYYMMDD.f`` with the fraction of the day, ``YYYYMM.f`` or ``YYYY.f`` (CDO manual,
#: "Time axis"; ICON's output ``units = "day as %Y%m%d.%f"``).
_ABSOLUTE = re.compile(r"\s*(day|month|year)s?\s+as\s+(%Y%m%d|%Y%m|%Y)(?:\.%f)?\s*",
                       re.IGNORECASE)


def absolute_dates(raw: np.ndarray, units: str, calendar: str) -> tuple[list, int] | None:
    """Decode an absolute time axis (``day as %Y%m%d.%f`` and its month and year forms).

    The integer part of each value is the date, the fraction is the elapsed part of that
    day (month, year): ``20981118.5`` is 2098-11-18 12:00, ``209811.5`` in a 30-day month
    is 2098-11-16 00:00, ``2098.25`` is a quarter of the calendar's year 2098 after its
    start. Lengths of months and years are the calendar's (cftime). Times are rounded to
    the nearest second (a fraction stored as a double is exact to about 10 microseconds).

    Parameters
    ----------
    raw : numpy.ndarray, shape (n,), float64
        The stored values; NaN where missing.
    units : str
        The ``units`` attribute; this function decodes only the forms of :data:`_ABSOLUTE`.
    calendar : str
        CF calendar name.

    Returns
    -------
    (dates, bad) or None
        ``dates``: one ``cftime.datetime`` (or None where the value is missing or not a
        date of `calendar`, e.g. ``20980230``) per value; ``bad``: how many finite values
        are not dates. None when `units` is not an absolute form.
    """
    import datetime

    m = _ABSOLUTE.fullmatch(units or "")
    if m is None:
        return None
    unit, form = m.group(1).lower(), m.group(2)
    dates: list = [None] * len(raw)
    bad = 0
    for i, value in enumerate(np.asarray(raw, np.float64)):
        if not np.isfinite(value):
            continue
        whole = int(np.floor(value))
        fraction = float(value) - whole
        y, rest = divmod(whole, {"%Y%m%d": 10000, "%Y%m": 100, "%Y": 1}[form])
        month, day = (rest // 100, rest % 100) if form == "%Y%m%d" else (
            (rest, 1) if form == "%Y%m" else (1, 1))
        try:
            start = cftime.datetime(y, month, day, calendar=calendar)
            if unit == "day" or form == "%Y%m%d":
                length = datetime.timedelta(days=1)
            elif unit == "month" or form == "%Y%m":
                end = cftime.datetime(y + month // 12, month % 12 + 1, 1, calendar=calendar)
                length = end - start
            else:
                length = cftime.datetime(y + 1, 1, 1, calendar=calendar) - start
        except (ValueError, TypeError):
            bad += 1
            continue
        dates[i] = start + datetime.timedelta(
            seconds=round(fraction * length.total_seconds()))
    return dates, bad


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
        how to show another dimension as frames with ``time_dim``; one fixed by `select`:
        the message says to choose steps with ``time_range``); if more than one is.
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

    def cf(bare_units, among):
        return [d for d in among if _is_time(d, ds.variables.get(d), bare_units=bare_units)
                or any(tuple(v.dims) == (d,) and _is_time("", v, bare_units=bare_units)
                       for v in listed)]

    def named(among):
        return [d for d in among if _TIME_NAMES.fullmatch(d)]

    # Bare time units are weaker evidence: a forecast's lead time (`step`, hours) beside
    # its CF time.
    for found, how in ((cf(False, free), "with a CF time coordinate"),
                       (cf(True, free), "with time units"), (named(free), "named as time")):
        if len(found) == 1:
            return found[0]
        if len(found) > 1:
            raise NcreelError(f"{where}variable '{variable}': ambiguous time dimension, "
                              f"{len(found)} dims {how}: {', '.join(found)} (its dims: "
                              f"{', '.join(dims)}); set time_dim=NAME to the one that is time")
    # A time axis fixed by `select` (select: {time: 3}): say so, not "no time axis".
    fixed = [d for d in dims if d in select]
    chosen = cf(True, fixed) or named(fixed)
    if chosen:
        raise NcreelError(f"{where}config key 'select.{chosen[0]}': '{chosen[0]}' is the time "
                          "axis, whose steps are the frames: choose steps with time_range "
                          "and time_every")
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
    absolute = absolute_dates(raw, units, calendar)
    if absolute is not None:
        dates, bad = absolute
        missing = int((~np.isfinite(raw)).sum())
        notes = [f"{bad} of {count} '{time_name}' values are not dates of the {calendar} "
                 f"calendar in units {units!r}"] if bad else []
        if missing:
            notes.append(f"{missing} of {count} '{time_name}' values are missing (fill "
                         "values); those steps have no time")
        return raw, dates, units, calendar, "; ".join(notes)
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
    """Order of the files by their first time (the order given when that cannot be decided).

    `file_dates` holds each file's decoded dates (:func:`_file_dates`; None where not).
    Whether the files' steps can be put in one order at all is :func:`time_order`'s to
    say.
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
    except TypeError:  # also cftime dates of different calendars
        return list(range(len(file_dates)))


#: A bound of config ``time_range``: a year, a month, a day, or a time of a day, as
#: precise as written (``1990``, ``1990-06``, ``1990-06-15``, ``1990-06-15 12:00``).
_BOUND = re.compile(r"\s*(-?\d+)(?:-(\d{1,2})(?:-(\d{1,2})(?:[T _](\d{1,2})(?::(\d{1,2})"
                    r"(?::(\d{1,2}))?)?)?)?)?\s*")
#: Largest value of each field of a bound after the year (month, day, hour, minute, second).
_BOUND_MAX = (12, 31, 23, 59, 59)


def time_bound(value, *, key: str = "time_range") -> tuple[int, ...]:
    """Read one bound of config ``time_range`` into its date fields, as precise as given.

    Parameters
    ----------
    value : int or str
        A year (``1990``), or ``YYYY-MM``, ``YYYY-MM-DD``, ``YYYY-MM-DD HH[:MM[:SS]]``
        (``T`` or a space before the time), in the file's own calendar (so ``1990-02-30``
        of a 360-day year is a day).
    key : str
        The config key, for the message (a date given to ``sel`` reads the same way).

    Returns
    -------
    tuple of int
        ``(year,)`` up to ``(year, month, day, hour, minute, second)``.

    Raises
    ------
    NcreelError
        Any other text, or a field out of its range (month 13, hour 24).
    """
    if isinstance(value, int) and not isinstance(value, bool):
        return (value,)
    m = _BOUND.fullmatch(str(value))
    fields = tuple(int(g) for g in m.groups() if g is not None) if m else ()
    if not fields or any(not (1 if i < 2 else 0) <= f <= top for i, (f, top)
                         in enumerate(zip(fields[1:], _BOUND_MAX, strict=False))):
        raise NcreelError(f"config key '{key}': {value!r} is not a date: use a year "
                          "(1990), YYYY-MM, YYYY-MM-DD or YYYY-MM-DD HH:MM[:SS], in the "
                          "file's calendar")
    return fields


def _check_calendar_day(value, bound: tuple[int, ...], calendar: str, variable: str) -> None:
    # A day the file's calendar does not have (2000-02-30 in the standard calendar,
    # 2000-02-29 in noleap) would select by text, silently: one line instead.
    if len(bound) < 3:
        return
    try:
        cftime.datetime(*bound[:3], calendar=calendar)
    except ValueError:
        raise NcreelError(f"config key 'time_range': {value!r} is not a day of the "
                          f"'{calendar}' calendar of '{variable}': give a date that "
                          "calendar has") from None


def time_window(time: TimeAxis, time_range, every: int = 1, *,
                variable: str = "") -> tuple[int, int, int] | None:
    """Return the steps of a series that config ``time_range`` and ``time_every`` show.

    Each bound of `time_range` is a period as precise as written and is inclusive: a
    step is shown when its date, cut to the first bound's precision, is not before it,
    and cut to the second's is not after it (``[1990, 1999]`` is every step of the years
    1990 to 1999; ``[1990-06, 1990-06]`` every step of June 1990). Dates are compared
    field by field in the file's own calendar, never converted. Of the steps in the
    range, every `every`-th is shown, starting with the first.

    Parameters
    ----------
    time : TimeAxis
        The whole series' time axis.
    time_range : sequence of two (int or str), or None
        Config ``time_range`` (:func:`time_bound`); None: the whole series.
    every : int
        Config ``time_every``, >= 1.
    variable : str
        For messages.

    Returns
    -------
    (start, stop, every) or None
        Half-open range of the whole series' indices and the stride; None when that is
        every step (the run then reads as one without these settings).

    Raises
    ------
    NcreelError
        A bound that is not a date, a range whose start is after its end, a series whose
        time is not decoded, a range holding no step (naming the series' first and last
        date), or a step dated outside the range between two inside it (times out of
        order).
    """
    n = len(time.labels)
    start, stop = 0, n
    if time_range is not None:
        lo, hi = (time_bound(v) for v in time_range)
        if lo[:len(hi)] > hi:
            raise NcreelError(f"config key 'time_range': [{time_range[0]}, {time_range[1]}] "
                              "starts after it ends: give [start, stop], both inclusive")
        if not time.decoded:
            raise NcreelError(f"config key 'time_range': the time of '{variable}' is not "
                              f"decoded ({time.note or 'no CF time units'}), so no step has "
                              "a date; use time_every alone, or set time (the time "
                              "variable)")
        for value, bound in zip(time_range, (lo, hi), strict=True):
            _check_calendar_day(value, bound, time.calendar, variable)
        fields = [iso_fields(lab) if lab is not None else None for lab in time.labels]
        inside = [i for i, f in enumerate(fields)
                  if f is not None and f[:len(lo)] >= lo and f[:len(hi)] <= hi]
        dated = [lab for lab in time.labels if lab is not None]
        if not inside:
            raise NcreelError(f"config key 'time_range': [{time_range[0]}, {time_range[1]}] "
                              f"holds no step of '{variable}', whose steps run from "
                              f"{dated[0]} to {dated[-1]} (calendar {time.calendar})")
        start, stop = inside[0], inside[-1] + 1
        kept = set(inside)
        stray = next((i for i in range(start, stop)
                      if fields[i] is not None and i not in kept), None)
        if stray is not None:
            raise NcreelError(f"config key 'time_range': step {stray} of '{variable}' "
                              f"({time.labels[stray]}) lies outside the range but between "
                              f"steps inside it ({time.labels[start]} .. "
                              f"{time.labels[stop - 1]}): the times are out of order; put "
                              "the files' steps in time order first")
    if isinstance(every, bool) or not isinstance(every, (int, np.integer)) or every < 1:
        raise NcreelError(f"config key 'time_every': {every!r}: give a whole number of at "
                          "least 1 (every Nth step of those in time_range)")
    # A stride past the last step shows the first step alone, whatever its size: kept
    # within the range so that no later integer arithmetic overflows.
    every = min(int(every), max(stop - start, 1))
    if (start, stop, every) == (0, n, 1):
        return None
    return start, stop, every


def _step_keys(decoded: tuple) -> tuple[tuple, np.ndarray]:
    """Return what one file's steps are ordered by: ``(kind, values)``.

    A file with decoded dates: kind ``("calendar", name)`` (cftime's name: ``gregorian``
    is ``standard``, ``365_day`` is ``noleap``) and each date as days since 0001-01-01 of
    that calendar (float64, a few microseconds exact): its raw numbers mapped linearly
    through two of its dates (CF time units are linear), or ``cftime.date2num`` of every
    date (ISO 8601 strings). A file none of whose times decode: its raw numbers, of kind
    ``("units", text)``. NaN where a step has no time.
    """
    raw, dates, units, _, _ = decoded
    have = np.flatnonzero([d is not None for d in dates])
    if not have.size:
        return ("units", units), np.where(np.isfinite(raw), raw, np.nan).astype(np.float64)
    calendar = dates[have[0]].calendar
    values = np.full(len(dates), np.nan)
    ends = have[[np.argmin(raw[have]), np.argmax(raw[have])]] if np.isfinite(
        raw[have]).all() else None
    if ends is not None and raw[ends[0]] < raw[ends[1]]:
        d0, d1 = cftime.date2num([dates[i] for i in ends], "days since 0001-01-01",
                                 calendar=calendar)
        values[have] = d0 + (raw[have] - raw[ends[0]]) * (d1 - d0) / (
            raw[ends[1]] - raw[ends[0]])
    else:  # one date, or dates from text
        values[have] = cftime.date2num([dates[i] for i in have], "days since 0001-01-01",
                                       calendar=calendar)
    return ("calendar", calendar), values


def _step_label(decoded: tuple, i: int) -> str:
    """Step `i` of a file as messages show it: ISO 8601, else its raw number."""
    date = decoded[1][i]
    return date.isoformat() if date is not None else f"{decoded[0][i]:g}"


def time_order(decoded: list, paths: list, kept: list) -> tuple[tuple | None, str]:
    """Put the kept steps of the files (in the order joined) in time order.

    Times out of order inside a file (``[0, 2, 1, 3]``) or across files (a file whose
    times fall between another's) are put in time order, and the note says where. When
    they cannot be ordered, the run stops: steps without a time among steps out of order
    (where they go is unknown), files of different calendars or of undecodable times
    whose order would be a guess. Steps without a time among steps in order stay where
    they are.

    Parameters
    ----------
    decoded : list of tuple
        Each file's :func:`_file_dates`, in the order the files are joined.
    paths : list of str
        The files, in that order.
    kept : list of tuple
        Each file's kept ``(start, stop)`` runs of its own time indices, ascending
        (repeated times dropped).

    Returns
    -------
    segments : tuple of (int, int, int), or None
        ``(file, start, stop)`` runs of a file's own time indices in time order; None when
        that is every file's kept steps in the order joined.
    note : str
        What was put in order ('' when nothing).

    Raises
    ------
    NcreelError
        One line naming the file(s) when the order cannot be decided.
    """
    kinds, fid, own, key = {}, [], [], []
    for k, (d, runs) in enumerate(zip(decoded, kept, strict=True)):
        kind, values = _step_keys(d)
        idx = np.concatenate([np.arange(a, b) for a, b in runs] or [np.empty(0, np.int64)])
        if np.isfinite(values[idx]).any():
            kinds.setdefault(kind, k)
        elif len(paths) > 1 and idx.size:
            raise NcreelError(
                f"input '{paths[k]}': has no time ncreel can decode ({d[4] or 'no time'}), "
                f"so its place among the {len(paths)} input files cannot be decided: name "
                "its time coordinate with config key time, or give one file")
        fid.append(np.full(idx.size, k))
        own.append(idx.astype(np.int64))
        key.append(values[idx])
    if len(kinds) > 1:
        (ka, a), (kb, b) = list(kinds.items())[:2]
        raise NcreelError(
            f"input files '{paths[a]}' ({' '.join(ka)}) and '{paths[b]}' ({' '.join(kb)}): "
            "times of different calendars or units cannot be put in one order: give files "
            "whose times share them (one run's output), or one file")
    fid, own, key = (np.concatenate(x) if x else np.empty(0) for x in (fid, own, key))
    known = np.flatnonzero(np.isfinite(key))
    back = np.flatnonzero(np.diff(key[known]) < 0)
    if not back.size:
        return None, ""  # in order (the usual case: no sort)
    if known.size < key.size:
        p, q = known[back[0]], known[back[0] + 1]
        raise NcreelError(
            f"input '{paths[fid[p]]}': times out of order "
            f"({_step_label(decoded[fid[q]], own[q])} after "
            f"{_step_label(decoded[fid[p]], own[p])}) beside {key.size - known.size} "
            "step(s) without a time: where those go cannot be decided; fix the time "
            "coordinate (or name another with config key time)")
    notes, spans = [], []
    for k in range(len(paths)):
        mine = np.flatnonzero(fid == k)
        if not mine.size:
            continue
        down = mine[1:][np.diff(key[mine]) < 0]
        if down.size:
            notes.append(f"'{paths[k]}' holds its times out of order ({down.size} step(s) "
                         f"earlier than the one before, first "
                         f"{_step_label(decoded[k], own[down[0]])} after "
                         f"{_step_label(decoded[k], own[down[0] - 1])})")
        lo, hi = mine[np.argmin(key[mine])], mine[np.argmax(key[mine])]
        spans.append((k, key[lo], key[hi], _step_label(decoded[k], own[lo]),
                      _step_label(decoded[k], own[hi])))
    for (k0, _, b0, sa0, sb0), (k1, a1, _, sa1, sb1) in zip(spans, spans[1:], strict=False):
        if a1 < b0:
            notes.append(f"times of '{paths[k1]}' ({sa1} .. {sb1}) fall inside those of "
                         f"'{paths[k0]}' ({sa0} .. {sb0})")
    order = np.argsort(key, kind="stable")
    f, i = fid[order], own[order]
    # A new run where the file changes or its own index does not go on by one.
    start = np.flatnonzero(np.r_[True, (f[1:] != f[:-1]) | (i[1:] != i[:-1] + 1)])
    stop = np.r_[start[1:], order.size]
    segments = tuple((int(f[a]), int(i[a]), int(i[b - 1]) + 1) for a, b in
                     zip(start, stop, strict=True))
    note = "; ".join(notes) + ": steps read in time order"
    log.info("%s", note)
    return segments, note
