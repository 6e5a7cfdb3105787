"""Config ``sel``: a level (or any extra dimension) chosen by its coordinate value.

``select`` takes an index along an extra dimension, as xarray's ``isel`` does; ``sel``
takes a value of the dimension's coordinate variable, as xarray's ``sel`` does: 850 hPa
as ``{plev: 85000}`` on a ``plev`` in Pa, or as ``{plev: "850 hPa"}`` in any unit the
coordinate's CF ``units`` convert from (cf-xarray's UDUNITS registry). It is resolved
once, at parse time, into the index ``select`` holds, so every job reads exactly the
level the run was planned with. A value the coordinate does not have is one line naming
the nearest values it has.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from ncreel.core.errors import NcreelError
from ncreel.input.units import cf_units_text

#: Relative tolerance of a numeric match: a float32 coordinate stores 0.1 as 0.100000001.
RTOL = 1e-6


def _number(value) -> bool:
    return isinstance(value, int | float | np.number) and not isinstance(value, bool)


def _in_units(value: str, units: str, key: str):
    """``"850 hPa"`` as a number in `units` (the coordinate's); None when not a quantity."""
    try:
        return float(value)
    except ValueError:
        pass
    from cf_xarray.units import units as registry

    try:
        quantity = registry.Quantity(cf_units_text(value))
    except Exception:  # pint raises several kinds for text that is not a quantity
        return None
    if not hasattr(quantity, "magnitude"):
        return None
    if not units:
        raise NcreelError(f"config key '{key}': {value!r} has units but the coordinate "
                          "has none: give a plain number")
    try:
        return float(quantity.to(registry.Unit(cf_units_text(units))).magnitude)
    except Exception as err:
        raise NcreelError(f"config key '{key}': {value!r} cannot be converted to the "
                          f"coordinate's units {units!r} ({err})") from None


def _show(v) -> str:
    return f"{v:g}" if _number(v) else str(v)


def coordinate_index(coord, value, *, key: str, dim: str) -> int:
    """Index along `dim` of the coordinate value `value`.

    Parameters
    ----------
    coord : xarray.DataArray
        The 1-D coordinate variable of `dim`.
    value : number or str
        A value in the coordinate's units; for a numeric coordinate also a string with
        units (``"850 hPa"``); for a text coordinate its text.
    key : str
        The config key, for messages (``sel.plev``).
    dim : str

    Returns
    -------
    int

    Raises
    ------
    NcreelError
        A value the coordinate does not have (naming the nearest three it has, with their
        indices), a value found more than once, a number for a text coordinate or text
        for a numeric one.
    """
    values = np.asarray(coord.values)
    units = str(coord.attrs.get("units", ""))
    what = f"coordinate '{coord.name}'" + (f" ({units})" if units else "")
    if values.dtype.kind in "iuf":
        number = value if _number(value) else _in_units(str(value), units, key)
        if number is None:
            raise NcreelError(f"config key '{key}': {value!r} is not a number; {what} has "
                              f"the values {', '.join(_show(v) for v in values[:8])}"
                              f"{' ...' if values.size > 8 else ''}")
        found = np.flatnonzero(np.isclose(values.astype(float), float(number), rtol=RTOL,
                                          atol=0.0) | (values == number))
        distance = np.abs(values.astype(float) - float(number))
        if not _number(value):  # "850 hPa": said with its value in the coordinate's units
            value = (f"{value} ({number:g} {units})" if str(value).strip() != f"{number:g}"
                     else number)
    else:
        text = np.char.strip(values.astype(str))
        found = np.flatnonzero(text == str(value).strip())
        distance = np.array([0.0 if t.lower() == str(value).lower() else 1.0 for t in text])
        values = text
    if found.size == 1:
        return int(found[0])
    if found.size > 1:
        raise NcreelError(f"config key '{key}': {_show(value)} is at {found.size} indices "
                          f"of {what} ({', '.join(map(str, found[:5]))}): give the index "
                          f"with select: {{{dim}: N}}")
    nearest = np.argsort(distance, kind="stable")[:3]
    shown = ", ".join(f"{_show(values[i])} (index {i})" for i in nearest)
    raise NcreelError(f"config key '{key}': {_show(value)} is not a value of {what}; the "
                      f"nearest are {shown}")


def date_index(ds, dim: str, value, *, key: str) -> int:
    """Index along `dim` of the date `value` on a CF time coordinate other than the frames'.

    A forecast's initialisation time, a member's start date: `value` is a date as precise
    as written, in the coordinate's own calendar (``"2000-01-01"``, ``"2000-01-01
    12:00"``, ``2000``), read as a bound of ``time_range`` is
    (:func:`ncreel.input.timeaxis.time_bound`), and must match exactly one of the
    coordinate's dates, decoded as the time axis's are.

    Parameters
    ----------
    ds : xarray.Dataset
        The input, opened with ``decode_times=False``.
    dim : str
        The dimension, whose coordinate variable has dates.
    value : str or int
    key : str
        The config key, for messages (``sel.init``).

    Returns
    -------
    int

    Raises
    ------
    NcreelError
        A `value` that is not a date, dates that cannot be decoded, or a `value` that
        matches none or several of them (naming the first few it has, with their indices).
    """
    from ncreel.input.timeaxis import _file_dates, time_bound

    want = time_bound(value, key=key)
    _, dates, _, _, note = _file_dates(ds, dim, ds.sizes[dim])
    if all(d is None for d in dates):
        raise NcreelError(f"config key '{key}': the dates of '{dim}' cannot be read "
                          f"({note}): give the index instead, select: {{{dim}: N}}")
    found = [i for i, d in enumerate(dates) if d is not None and (
        d.year, d.month, d.day, d.hour, d.minute, d.second)[:len(want)] == want]
    if len(found) == 1:
        return found[0]
    shown = ", ".join(f"{'?' if d is None else d.isoformat(sep=' ').removesuffix(' 00:00:00')}"
                      f" (index {i})" for i, d in list(enumerate(dates))[:4])
    more = " ..." if len(dates) > 4 else ""
    if found:
        raise NcreelError(f"config key '{key}': {value} matches {len(found)} dates of "
                          f"'{dim}' ({shown}{more}): give a more precise date, or the index "
                          f"with select: {{{dim}: N}}")
    raise NcreelError(f"config key '{key}': {value} is not a date of '{dim}'; it has "
                      f"{shown}{more}")


def _dates(coord) -> bool:
    return (str(coord.attrs.get("axis", "")).upper() == "T"
            or "since" in str(coord.attrs.get("units", "")))


def resolve_sel(path: str, variable: str, sel: Mapping | None, select: Mapping | None,
                *, key: str = "sel", time_dim: str | None = None) -> dict:
    """Turn config ``sel`` (coordinate values) into indices, merged with ``select``.

    Parameters
    ----------
    path : str
        The first input file (every file shares the grid and its extra dimensions).
    variable : str
        Config ``variable`` (``GROUP/NAME`` in a group).
    sel : mapping of str to number or str
        Dimension -> coordinate value.
    select : mapping of str to int
        Dimension -> index (config ``select``).
    key : str
        Config key of `sel` in messages (``panels[1].sel``).
    time_dim : str, optional
        Config ``time_dim``: the frames' axis. Without it, a variable's one dimension
        with dates is. A dimension with dates other than the frames' (a forecast's
        ``init``) takes a date (:func:`date_index`).

    Returns
    -------
    dict of str to int
        `select` plus the index of each value of `sel`.

    Raises
    ------
    NcreelError
        A dimension given in both, not a dimension of the variable, the frames' time
        axis, one without a 1-D coordinate variable (use ``select``), or a value not
        found (:func:`coordinate_index`, :func:`date_index`).
    """
    out = dict(select or {})
    if not sel:
        return out
    from ncreel.input.source import _open, split_variable

    group, name = split_variable(variable)
    with _open(path, group) as ds:
        if name not in ds.variables:
            return out  # open_series names the missing variable
        da = ds[name]
        for dim, value in sel.items():
            where = f"{key}.{dim}"
            if dim in out:
                raise NcreelError(f"config keys '{where}' and '{key[:-3]}select.{dim}' both "
                                  f"choose along '{dim}': give one of them")
            if dim not in da.dims:
                raise NcreelError(f"config key '{where}': '{dim}' is not a dimension of "
                                  f"'{name}' (its dims: {', '.join(map(str, da.dims))})")
            coord = ds.variables.get(dim)
            if coord is None or coord.dims != (dim,):
                raise NcreelError(f"config key '{where}': dimension '{dim}' has no "
                                  "coordinate variable to find the value in: give the "
                                  f"index instead, select: {{{dim}: N}}")
            if _dates(coord):
                dated = [d for d in da.dims if d in ds.variables and _dates(ds.variables[d])]
                if dim == time_dim or (time_dim is None and dated == [dim]):
                    raise NcreelError(f"config key '{where}': '{dim}' is the time axis, "
                                      "whose steps are the frames: choose steps with "
                                      "time_range and time_every")
                out[dim] = date_index(ds, dim, value, key=where)
                continue
            out[dim] = coordinate_index(ds[dim], value, key=where, dim=dim)
    return out


def sel_text(sel: Mapping, select: Sequence | Mapping) -> str:
    """``plev=85000 (index 3)``: how a resolved ``sel`` is said (``ncreel inspect``)."""
    return ", ".join(f"{d}={_show(v)} (index {select[d]})" for d, v in sel.items())
