"""Time labels of frames: dates as precise as the time step needs, in the file's calendar.

The table keeps full ISO 8601 date-times (:attr:`ncreel.timeaxis.TimeAxis.labels`); a frame
shows what tells its steps apart: annual means read ``1860``, monthly ``1980-06``, daily
``1980-06-01`` and sub-daily ``1980-06-01 12:00``. The step is the median of the
differences between consecutive dates, computed with cftime in the file's own calendar (a
360-day year, a noleap February), so irregular steps and calendars do not change the
choice; wherever two different dates would then read the same, every label gets the next
finer form. A time axis that does not decode is labelled ``name = value units``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import cftime
import numpy as np

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


def frame_labels(labels: Sequence[str | None], values: np.ndarray, *, calendar: str,
                 units: str, name: str, time_dim: str) -> list[str]:
    """Return the text each frame shows for its time.

    Parameters
    ----------
    labels : sequence of str or None, length n_time
        ISO 8601 date-times (:attr:`ncreel.timeaxis.TimeAxis.labels`); None where a step did
        not decode.
    values : numpy.ndarray, shape (n_time,)
        Raw time values as stored (NaN where absent).
    calendar, units : str
        The time coordinate's CF calendar and units.
    name : str
        The time coordinate's name (e.g. ``time``, ``TIME``, ``XTIME``).
    time_dim : str
        The time dimension's name.

    Returns
    -------
    list of str, length n_time
        Dates formatted for the step (:func:`date_resolution`); where a step has no date,
        ``name = value units`` (the raw value, see :func:`format_values`), or
        ``<time_dim> step <index>`` when there is no value either.
    """
    parsed = [parse_label(lab) if lab is not None else None for lab in labels]
    dates = [p for p in parsed if p is not None]
    resolution = date_resolution(dates, calendar) if dates else "day"
    raw = (format_values(np.asarray(values, dtype=np.float64).reshape(-1))
           if len(dates) < len(parsed) else [])
    out = []
    for i, (p, lab) in enumerate(zip(parsed, labels, strict=True)):
        if p is not None:
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


def series_labels(series) -> list[str]:
    """Return the frame label of each time step of `series` (:func:`frame_labels`).

    Parameters
    ----------
    series : ncreel.source.Series
        An opened series (its time axis, calendar and names).

    Returns
    -------
    list of str
        One label per step.
    """
    axis = series.time_axis()
    return frame_labels(axis.labels, axis.values, calendar=axis.calendar, units=axis.units,
                        name=series.time_name or series.time_dim, time_dim=series.time_dim)
