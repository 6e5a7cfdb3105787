"""Time labels of frames: dates as precise as the time step needs, in the file's calendar.

The table keeps full ISO 8601 date-times (:attr:`ncreel.input.timeaxis.TimeAxis.labels`); a frame
shows what tells its steps apart: annual means read ``1860``, monthly ``1980-06``, daily
``1980-06-01`` and sub-daily ``1980-06-01 12:00``. The step is the median of the
differences between consecutive dates, computed with cftime in the file's own calendar (a
360-day year, a noleap February), so irregular steps and calendars do not change the
choice; wherever two different dates would then read the same, every label gets the next
finer form. A time axis that does not decode is labelled ``name = value units``.

Config ``time_format`` replaces the automatic form with a ``strftime``-style format
(:func:`strftime_date`), read in the file's calendar: ``%d %b %Y`` of the 30th day of
February of a 360-day year reads ``30 Feb 2000``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import cftime
import numpy as np

from ncreel.core.errors import NcreelError

#: Label forms from coarse to fine.
RESOLUTIONS = ("year", "month", "day", "minute", "second", "microsecond")

_ISO = re.compile(r"(-?\d+)-(\d{1,2})-(\d{1,2})"
                  r"(?:[T _](\d{1,2}):(\d{2})(?::(\d{2})(?:\.(\d{1,6}))?)?)?")
#: Pairs of consecutive dates the step is measured on, at most (see :func:`step_seconds`).
STEP_SAMPLE = 4000
#: Label of each form, of ``(year, month, day, hour, minute, second, microsecond)``.
_FORMATS = {"year": "{0:04d}", "month": "{0:04d}-{1:02d}", "day": "{0:04d}-{1:02d}-{2:02d}",
            "minute": "{0:04d}-{1:02d}-{2:02d} {3:02d}:{4:02d}",
            "second": "{0:04d}-{1:02d}-{2:02d} {3:02d}:{4:02d}:{5:02d}",
            "microsecond": "{0:04d}-{1:02d}-{2:02d} {3:02d}:{4:02d}:{5:02d}.{6:06d}"}
#: Parts of a date each form shows (hours and minutes together).
_SHOWN = {"year": 1, "month": 2, "day": 3, "minute": 5, "second": 6, "microsecond": 7}
#: Shortest step (days) of each form: a 360-day year, a 28-day February, ...
_STEP_DAYS = ((359.0, "year"), (27.5, "month"), (1.0 - 1.0 / 1440, "day"),
              (59.0 / 86400, "minute"), (0.999 / 86400, "second"))


def parse_label(label: str) -> tuple[int, ...] | None:
    """``(year, month, day, hour, minute, second, microsecond)`` of an ISO 8601 label.

    Returns None when `label` is not such a date-time.
    """
    if len(label) == 19 and label[4] == "-" and label[10] == "T":
        # cftime's isoformat of years 0-9999 (the labels of a decoded axis): sliced, for
        # speed (an hourly decade is 87 600 labels).
        try:
            return (int(label[:4]), int(label[5:7]), int(label[8:10]), int(label[11:13]),
                    int(label[14:16]), int(label[17:19]), 0)
        except ValueError:
            pass
    m = _ISO.fullmatch(label.strip())
    if m is None:
        return None
    *head, frac = m.groups()
    return (*(int(g or 0) for g in head), int((frac or "0").ljust(6, "0")))


def format_date(parts: Sequence[int], resolution: str) -> str:
    """Format a date ``(year, month, day, hour, minute, second, microsecond)``.

    Parameters
    ----------
    parts : sequence of 7 int
        As :func:`parse_label` returns.
    resolution : str
        One of :data:`RESOLUTIONS`: ``1980``, ``1980-06``, ``1980-06-01``,
        ``1980-06-01 12:00``, ``1980-06-01 12:00:30``, ``1980-06-01 12:00:30.250000``.
    """
    return _FORMATS[resolution].format(*parts)


def _full(dates: Sequence[tuple]) -> str:
    # Every part that is not zero in some date: midnight dates read as days.
    if any(p[6] for p in dates):
        return "microsecond"
    if any(p[5] for p in dates):
        return "second"
    return "minute" if any(p[3] or p[4] for p in dates) else "day"


def step_seconds(dates: Sequence[tuple], calendar: str) -> float | None:
    """Median time step in seconds between consecutive dates, in `calendar`.

    Parameters
    ----------
    dates : sequence of tuple
        ``(year, month, day, hour, minute, second, microsecond)`` in time order.
    calendar : str
        CF calendar name (``360_day``, ``noleap``, ``standard``, ...).

    Returns
    -------
    float or None
        None when there are fewer than two different dates, or they are not valid dates
        of `calendar`.

    Notes
    -----
    Of a long axis, :data:`STEP_SAMPLE` pairs of consecutive dates spread evenly over it
    are used (an hourly decade has 87 600 steps; the median of a spread sample is the
    same).
    """
    n = len(dates)
    first = np.unique(np.linspace(0, n - 2, min(n - 1, STEP_SAMPLE)).astype(int)) if n > 1 \
        else np.empty(0, int)
    try:
        pairs = [(cftime.datetime(*dates[i], calendar=calendar or "standard"),
                  cftime.datetime(*dates[i + 1], calendar=calendar or "standard"))
                 for i in first.tolist()]
    except (ValueError, TypeError):
        return None
    steps = np.array([abs((b - a).total_seconds()) for a, b in pairs])
    steps = steps[steps > 0]
    return float(np.median(steps)) if steps.size else None


def date_resolution(dates: Sequence[tuple], calendar: str) -> str:
    """Coarsest label form (:data:`RESOLUTIONS`) that suits the time axis as a whole.

    The form follows the median step (:func:`step_seconds`): at least 359 days yearly,
    27.5 days monthly, a day daily, a minute to the minute, else to the second. One date
    (or no step) gets the full date, with the time of day unless it is midnight. If two
    different dates would then read the same, a finer form is taken.

    Parameters
    ----------
    dates : sequence of tuple
        ``(year, month, day, hour, minute, second, microsecond)`` in time order.
    calendar : str
        CF calendar name.
    """
    step = step_seconds(dates, calendar) if len(dates) > 1 else None
    if step is None:
        level = _full(dates)
    else:
        level = next((name for days, name in _STEP_DAYS if step >= days * 86400),
                     "microsecond")
    distinct = set(dates)
    k = RESOLUTIONS.index(level)
    # Two different dates read alike when they agree on every part the form shows.
    while k < len(RESOLUTIONS) - 1 and len({p[:_SHOWN[RESOLUTIONS[k]]]
                                            for p in distinct}) < len(distinct):
        k += 1
    return RESOLUTIONS[k]


def format_values(values: np.ndarray) -> list[str | None]:
    """Raw time values as text with the same number of decimals, None where not finite.

    The decimals are the fewest that keep each value to about float32 precision (a
    stored ``4748.91f`` reads ``4748.91``, not ``4748.91015625``) and tell consecutive
    different values apart; values of 1e15 or more use 6 significant digits.
    """
    v = np.asarray(values, dtype=np.float64)
    ok = np.isfinite(v) & (np.abs(v) < 1e15)
    fin = v[ok]
    decimals = 0
    tol = 5e-7 * np.maximum(np.abs(fin), 1.0)
    while decimals < 6 and (np.abs(np.round(fin, decimals) - fin) > tol).any():
        decimals += 1

    def texts(d):
        return [f"{x:.{d}f}" if good else (f"{x:.6g}" if np.isfinite(x) else None)
                for x, good in zip(v.tolist(), ok.tolist(), strict=True)]

    out = texts(decimals)
    while decimals < 12 and any(a == b and x != y for a, b, x, y in
                                zip(out[:-1], out[1:], v[:-1], v[1:], strict=True)):
        decimals += 1
        out = texts(decimals)
    return out


#: English names (the C locale's, as ``strftime`` gives them without a locale set).
_DAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
_MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August",
           "September", "October", "November", "December")
#: Directives :func:`strftime_date` formats: Python's documented ``strftime`` codes but
#: ``%z``/``%Z`` (CF time has no zone), ``%G``/``%V`` (ISO week-years, Gregorian only).
#: ``%c``, ``%x``, ``%X`` are spelled as in the C locale.
TIME_FORMAT_CODES = "aAbBcdfHIjmMpSUwuWxXyY%"
_EXPAND = {"c": "%a %b %e %H:%M:%S %Y", "x": "%m/%d/%y", "X": "%H:%M:%S"}
_WHY_NOT = {"z": "CF time has no time zone", "Z": "CF time has no time zone",
            "G": "ISO week-years are Gregorian only", "V": "ISO weeks are Gregorian only",
            "s": "seconds since 1970 are not a date of the file's calendar"}


def _directives(time_format: str, codes: str = TIME_FORMAT_CODES) -> list[str]:
    """Split `time_format` into literal texts and one-letter directives (``"%d"``).

    ``%c``, ``%x`` and ``%X`` are expanded (:data:`_EXPAND`); ``%e`` (the day, padded
    with a space) is a code of the expansion of ``%c`` only.

    Raises
    ------
    ValueError
        Naming the first code `codes` does not hold.
    """
    parts: list[str] = []
    i = 0
    while i < len(time_format):
        j = time_format.find("%", i)
        if j < 0:
            parts.append(time_format[i:])
            break
        if j > i:
            parts.append(time_format[i:j])
        code = time_format[j + 1:j + 2]
        if code == "" or code not in codes:
            if code:
                shown = f"%{code}"
                why = _WHY_NOT.get(code, "not a strftime code ncreel formats")
            else:
                shown, why = "a lone % at the end", "no code follows it"
            raise ValueError(f"{shown}: {why}; use %% for a percent sign, or the codes "
                             f"%{' %'.join(TIME_FORMAT_CODES[:-1])}")
        if code in _EXPAND:
            parts.extend(_directives(_EXPAND[code], codes + "e"))
        else:
            parts.append("%" if code == "%" else f"%{code}")
        i = j + 2
    return parts


def _week(d, first: int) -> str:
    # Week of the year, the days before its first Sunday (first=6) or Monday (first=0)
    # in week 0, as C's strftime counts them, in the calendar's own days.
    return f"{(d.dayofyr - 1 + 7 - (d.dayofwk - first) % 7) // 7:02d}"


#: Each directive of a cftime date, from its fields and its calendar's day of the week
#: (``dayofwk``, 0 Monday) and of the year. cftime's own strftime formats a stand-in
#: Gregorian year and puts the real one back where it finds its digits: ``%x`` and ``%C``
#: keep the stand-in's (1861 reads ``79``), so ncreel formats the fields itself.
_FIELDS = {
    "Y": lambda d: f"-{-d.year:04d}" if d.year < 0 else f"{d.year:04d}",
    "y": lambda d: f"{abs(d.year) % 100:02d}",
    "m": lambda d: f"{d.month:02d}",
    "d": lambda d: f"{d.day:02d}",
    "e": lambda d: f"{d.day:2d}",
    "H": lambda d: f"{d.hour:02d}",
    "I": lambda d: f"{(d.hour + 11) % 12 + 1:02d}",
    "p": lambda d: "AM" if d.hour < 12 else "PM",
    "M": lambda d: f"{d.minute:02d}",
    "S": lambda d: f"{d.second:02d}",
    "f": lambda d: f"{d.microsecond:06d}",
    "b": lambda d: _MONTHS[d.month - 1][:3],
    "B": lambda d: _MONTHS[d.month - 1],
    "a": lambda d: _DAYS[d.dayofwk][:3],
    "A": lambda d: _DAYS[d.dayofwk],
    "j": lambda d: f"{d.dayofyr:03d}",
    "w": lambda d: str((d.dayofwk + 1) % 7),  # Sunday 0
    "u": lambda d: str(d.dayofwk + 1),  # Monday 1
    "U": lambda d: _week(d, 6),
    "W": lambda d: _week(d, 0),
}


def check_time_format(time_format: str) -> list[str]:
    """Check config ``time_format`` and split it for :func:`strftime_date`.

    Parameters
    ----------
    time_format : str
        A ``strftime``-style format (:data:`TIME_FORMAT_CODES`).

    Returns
    -------
    list of str
        Literal texts and directives (``"%d"``).

    Raises
    ------
    NcreelError
        One line naming ``time_format``: an empty format, a line break or other control
        character, or a code ncreel does not format (``%Q``, ``%z``, a lone ``%``).
    """
    key = f"config key 'time_format' = {time_format!r}"
    if not isinstance(time_format, str) or not time_format.strip():
        raise NcreelError(f"{key}: give a strftime format such as '%d %b %Y', or null for "
                          "the automatic date")
    if any(ord(c) < 32 or ord(c) == 127 for c in time_format):
        raise NcreelError(f"{key}: the time label is one line; remove the line break or "
                          "control character")
    try:
        return _directives(time_format)
    except ValueError as err:
        raise NcreelError(f"{key}: {err}") from None


def strftime_date(parts: Sequence[int], time_format: str | Sequence[str],
                  calendar: str) -> str:
    """Format a date ``(year, month, day, hour, minute, second, microsecond)`` of `calendar`.

    Parameters
    ----------
    parts : sequence of 7 int
        As :func:`parse_label` returns.
    time_format : str or list of str
        A ``strftime``-style format, or :func:`check_time_format`'s split of one. Codes
        (:data:`TIME_FORMAT_CODES`): ``%Y`` year (4 digits, ``-0050`` before year 0),
        ``%y``, ``%m``, ``%d``, ``%H``, ``%I``, ``%p``, ``%M``, ``%S``, ``%f``
        (microseconds), ``%b``/``%B`` month names, ``%a``/``%A`` day names, ``%j`` day of
        the year, ``%w``/``%u`` day of the week, ``%U``/``%W`` week numbers, ``%c``,
        ``%x``, ``%X`` (C locale), ``%%``.
    calendar : str
        CF calendar name: days of the year and of the week are those of this calendar
        (cftime's ``dayofyr``, ``dayofwk``: 30 February of a ``360_day`` year is day 60),
        with no conversion to the Gregorian calendar.

    Returns
    -------
    str

    Raises
    ------
    NcreelError
        `time_format` has a code ncreel does not format (:func:`check_time_format`).
    ValueError
        `parts` is not a date of `calendar`.
    """
    pieces = check_time_format(time_format) if isinstance(time_format, str) else time_format
    d = cftime.datetime(*parts, calendar=calendar or "standard")
    # Literal texts hold no "%" (a "%%" is the piece "%"): directives are "%" + a code.
    return "".join(_FIELDS[p[1]](d) if len(p) == 2 and p[0] == "%" else p
                   for p in pieces)


def time_format_note(labels: Sequence[str], dates: Sequence, time_format: str) -> str | None:
    """Say when `time_format` shows different dates alike; None when it tells them apart.

    Parameters
    ----------
    labels : sequence of str
        The frame labels `time_format` gives, one per step.
    dates : sequence
        Each step's date (any hashable, e.g. the ISO label), None where it did not decode.
    time_format : str
        Config ``time_format``, quoted in the note.

    Returns
    -------
    str or None
        A one-line warning: every frame reads the same, or how many steps share their
        label with an earlier, different date (with the first such pair).
    """
    seen: dict[str, object] = {}
    alike, example = 0, None
    for lab, date in zip(labels, dates, strict=True):
        if date is None:
            continue
        first = seen.setdefault(lab, date)
        if first != date:
            alike += 1
            example = example or (lab, first, date)
    if not alike:
        return None
    key = f"config key 'time_format' = {time_format!r}"
    if len(seen) == 1:
        return (f"{key}: every frame's time reads {next(iter(seen))!r} ({len(labels)} "
                "steps); add finer codes (e.g. %m, %d, %H:%M) to tell them apart")
    lab, a, b = example
    return (f"{key}: {alike} of {len(labels)} steps read like an earlier, different date "
            f"({a} and {b} both read {lab!r}); add finer codes to tell them apart")


def frame_labels(labels: Sequence[str | None], values: np.ndarray, *, calendar: str,
                 units: str, name: str, time_dim: str,
                 time_format: str | None = None) -> list[str]:
    """Return the text each frame shows for its time.

    Parameters
    ----------
    labels : sequence of str or None, length n_time
        ISO 8601 date-times (:attr:`ncreel.input.timeaxis.TimeAxis.labels`); None where a step did
        not decode.
    values : numpy.ndarray, shape (n_time,)
        Raw time values as stored (NaN where absent).
    calendar, units : str
        The time coordinate's CF calendar and units.
    name : str
        The time coordinate's name (e.g. ``time``, ``TIME``, ``XTIME``).
    time_dim : str
        The time dimension's name.
    time_format : str, optional
        Config ``time_format``: dates formatted with it in `calendar`
        (:func:`strftime_date`); None: as precise as the step needs.

    Returns
    -------
    list of str, length n_time
        Dates formatted with `time_format`, or for the step (:func:`date_resolution`);
        where a step has no date,
        ``name = value units`` (the raw value, see :func:`format_values`), or
        ``<time_dim> step <index>`` when there is no value either.
    """
    parsed = [parse_label(lab) if lab is not None else None for lab in labels]
    dates = [p for p in parsed if p is not None]
    pieces = check_time_format(time_format) if time_format is not None else None
    resolution = date_resolution(dates, calendar) if dates and pieces is None else "day"
    raw = (format_values(np.asarray(values, dtype=np.float64).reshape(-1))
           if len(dates) < len(parsed) else [])
    out = []
    for i, (p, lab) in enumerate(zip(parsed, labels, strict=True)):
        if p is not None and pieces is not None:
            try:
                out.append(strftime_date(p, pieces, calendar))
            except ValueError:  # not a date of the calendar: read as stored
                out.append(str(lab))
        elif p is not None:
            out.append(format_date(p, resolution))
        elif lab is not None:  # a label that is not ISO 8601: shown as it is
            out.append(str(lab))
        elif i < len(raw) and raw[i] is not None:
            # Units "1" (dimensionless, CF) say nothing on a frame.
            shown = "" if units.strip() in ("1", "") else units
            out.append(f"{name} = {raw[i]} {shown}".rstrip())
        else:
            out.append(f"{time_dim} step {i}")
    return out


def series_labels(series, time_format: str | None = None) -> list[str]:
    """Return the frame label of each time step of `series` (:func:`frame_labels`).

    Parameters
    ----------
    series : ncreel.input.source.Series
        An opened series (its time axis, calendar and names).
    time_format : str, optional
        Config ``time_format``; None: the automatic form. Panels match their files' steps
        by the automatic labels (:func:`ncreel.render.panelplan.plan_panels`), whatever is shown.

    Returns
    -------
    list of str
        One label per step.
    """
    axis = series.time_axis()
    return frame_labels(axis.labels, axis.values, calendar=axis.calendar, units=axis.units,
                        name=series.time_name or series.time_dim, time_dim=series.time_dim,
                        time_format=time_format)
