"""CF axis detection: which variables and dimensions are latitude, longitude, x and y.

The rules of the CF conventions (section 4: standard names, units, ``axis``; section 5:
the ``coordinates`` attribute and grid mappings), plus the looser names of models that do
not follow them, which are said in a log note. Used by :mod:`ncreel.input.source` to see a
variable as ``(time, y, x)`` and by :mod:`ncreel.input.mesh` and :mod:`ncreel.cells.geometry`.
"""

from __future__ import annotations

import logging
import re

import numpy as np
import xarray as xr

from ncreel.core.errors import NcreelError
from ncreel.input.gridmap import X_NAMES, Y_NAMES, GridMapping

log = logging.getLogger(__name__)


# CF conventions section 4: how latitude/longitude and X/Y axes are recognised.
_LAT_NAMES = {"lat", "latitude", "nav_lat", "rlat", "y", "yc", "south_north", "nlat", "j"}
_LON_NAMES = {"lon", "longitude", "nav_lon", "rlon", "x", "xc", "west_east", "nlon", "i"}
_LAT_UNITS = {"degrees_north", "degree_north", "degree_n", "degrees_n", "degreen", "degreesn"}
_LON_UNITS = {"degrees_east", "degree_east", "degree_e", "degrees_e", "degreee", "degreese"}


def _attr(var, key: str) -> str:
    return str(getattr(var, "attrs", {}).get(key, "")).strip().lower()


# CF section 4.1/4.2: (standard names, units, names when strict, axis, loose names).
# Rotated-pole grid_latitude/grid_longitude are not latitude/longitude (see _is_spatial).
_AXES = {
    "lat": ({"latitude"}, _LAT_UNITS, {"lat", "latitude", "nav_lat", "xlat"},
            "y", {"lat", "latitude"}),
    "lon": ({"longitude"}, _LON_UNITS, {"lon", "longitude", "nav_lon",
                                        "xlong"}, "x", {"lon", "longitude"}),
}


def _is_axis(kind: str, name: str, var, strict: bool = False) -> bool:
    std, units, strict_names, axis, names = _AXES[kind]
    if _attr(var, "standard_name") in std or _attr(var, "units") in units:
        return True
    if strict:
        return name.lower() in strict_names
    return _attr(var, "axis") == axis or name.lower() in names


def _is_lat(name: str, var, strict: bool = False) -> bool:
    return _is_axis("lat", name, var, strict)


def _is_lon(name: str, var, strict: bool = False) -> bool:
    return _is_axis("lon", name, var, strict)


def _is_spatial(name: str, var) -> bool:
    if var is not None and (_attr(var, "axis") in {"x", "y"}
                            or _is_lat(name, var) or _is_lon(name, var)
                            or _attr(var, "standard_name").startswith(("projection_",
                                                                       "grid_l"))):
        return True
    return name.lower() in _LAT_NAMES | _LON_NAMES


def _coordinates_attr(da: xr.DataArray) -> list[str]:
    # xarray moves the CF `coordinates` attribute into encoding when it decodes coordinates.
    return str(da.encoding.get("coordinates", da.attrs.get("coordinates", ""))).split()


def _find_coordinate(ds: xr.Dataset, da: xr.DataArray, kind: str, given: str | None,
                     tdim: str, spatial: list[str], where: str) -> str | None:
    """Name of the latitude or longitude coordinate of `da`'s grid, or None.

    Candidates are variables whose dims are among the grid's (a leading time dimension is
    allowed, as in WRF). The best CF evidence wins: ``standard_name`` latitude/longitude,
    units degrees_north/east or ``_CoordinateAxisType`` Lat/Lon, then the name
    (``lat``, ``nav_lat``, ``XLAT``...), then such a name with a grid suffix (``lat2d``,
    ``lon_rho``), without time dimension, standard_name or units other than degrees, when
    the values fit (latitudes within ±90 degrees, longitudes within -360..720), said in a
    log note; ties go to those named in the ``coordinates``
    attribute or being dimension coordinates. A tie after that is an error. Rotated-pole
    ``grid_latitude``/``grid_longitude`` and projection x/y are never latitude/longitude
    (CF section 5.6): their grid mapping places them.
    """
    allowed, grid = set(spatial) | {tdim}, set(spatial)
    word = "latitude" if kind == "lat" else "longitude"
    if given is not None:
        dims = set(map(str, ds[given].dims))
        if not dims <= allowed or not dims & grid:
            raise NcreelError(f"config key '{kind}': '{given}' has dims "
                              f"({', '.join(map(str, ds[given].dims))}); a {word} coordinate "
                              f"needs dims among ({', '.join(spatial)})")
        if _is_grid_xy(ds[given]):
            raise NcreelError(f"config key '{kind}': '{given}' is a "
                              f"{_attr(ds[given], 'standard_name')} (rotated or projected "
                              f"grid coordinate), not a {word}: leave {kind} unset (the "
                              "grid mapping places the grid) or name 2-D latitude/longitude")
        return given
    std, units, names, _, _ = _AXES[kind]
    listed = set(_coordinates_attr(da)) | grid
    found = []
    for vname, var in ds.variables.items():
        vname = str(vname)
        dims = set(map(str, var.dims))
        if not dims or not dims <= allowed or not dims & grid or var.dtype.kind not in "fiu":
            continue
        if _is_grid_xy(var):
            continue
        if (_attr(var, "standard_name") in std or _attr(var, "units") in units
                or _attr(var, "_CoordinateAxisType") == kind):
            tier = 0
        elif vname.lower() in names:
            tier = 2
        elif _LOOSE[kind].fullmatch(vname) and dims <= grid and vname != da.name \
                and not _attr(var, "standard_name") and "deg" in (_attr(var, "units") or "deg") \
                and _plausible(var, kind):
            tier = 3
        else:
            continue
        found.append((tier, vname not in listed, vname))
    if not found:
        return None
    found.sort()
    best = [f[2] for f in found if f[:2] == found[0][:2]]
    if len(best) > 1:
        raise NcreelError(f"{where}: variable '{da.name}': ambiguous {word} coordinate, "
                          f"candidates {', '.join(best)}; set {kind}=NAME")
    if found[0][0] == 3:
        log.warning("%s: '%s' taken as the %s of '%s' from its name and values alone (no "
                    "units or standard_name); if that is wrong, set %s=NAME", where,
                    best[0], word, da.name, kind)
    return best[0]


#: Names of latitudes / longitudes with a grid suffix (``lat2d``, ``lat_rho``, ``LONG``,
#: ``lon_t``), for coordinates without attributes.
_SUFFIX = r"(_?2d|_?\d+|_(rho|psi|cell|center|centre|grid|[tuvc])|[tc])?"
_LOOSE = {"lat": re.compile(rf"(?i)(nav_)?lat(itude)?{_SUFFIX}"),
          "lon": re.compile(rf"(?i)(nav_)?lon(g|gitude)?{_SUFFIX}")}


def _plausible(var, kind: str) -> bool:
    """Whether `var`'s values can be latitudes (within ±90) or longitudes (-360..720)."""
    if var.size > 50_000_000:
        return False
    v = np.asarray(var.values, np.float64)
    v = v[np.isfinite(v)]
    if v.size == 0:
        return False
    lo, hi = (-90.0, 90.0) if kind == "lat" else (-360.0, 720.0)
    return bool(v.min() >= lo and v.max() <= hi and (v.size == 1 or v.max() > v.min()))


def _is_grid_xy(var) -> bool:
    """Tell a rotated-pole or projection x/y coordinate (CF standard name): never lat/lon."""
    return _attr(var, "standard_name") in X_NAMES | Y_NAMES


def cf_bounds(ds: xr.Dataset, name: str) -> np.ndarray | None:
    """Read the CF ``bounds`` of 1-D coordinate `name` (CF section 7.1).

    Returns
    -------
    numpy.ndarray, shape (n, 2), float64; or None
        In the coordinate's stored order; None when `name` has no usable ``bounds``.
    """
    bname = ds[name].attrs.get("bounds")
    if not bname or bname not in ds.variables:
        return None
    b = np.asarray(ds[bname].values, dtype=np.float64)
    if b.ndim != 2 or b.shape[1] != 2 or b.shape[0] != ds[name].size:
        return None
    return b


def _find_projection(ds: xr.Dataset, da: xr.DataArray, spatial: list[str], where: str,
                     name: str, has_lat_lon: bool = False
                     ) -> tuple[str | None, str | None, GridMapping | None]:
    """``(x_name, y_name, mapping)`` of a grid in projection x/y, else Nones.

    x/y are the 1-D coordinate variables of the two spatial dims (or those the extended
    ``grid_mapping`` form lists): x the one with CF ``standard_name``
    projection_x_coordinate / grid_longitude (else ``axis: X``, else the last dim), y the
    other. The mapping is the variable the data's ``grid_mapping`` names (CF 5.6; when it
    names none but x/y have CF projection standard names, the file's only grid mapping
    variable, said in a note), read
    with pyproj (:func:`ncreel.input.gridmap.read_grid_mapping`); one pyproj cannot read is an
    error, or a note when the file has its own latitude/longitude (`has_lat_lon`), which
    then place the cells.
    """
    from ncreel.input.gridmap import parse_grid_mapping, read_grid_mapping

    entries = parse_grid_mapping(da.attrs.get("grid_mapping",
                                              da.encoding.get("grid_mapping", "")))
    candidates = [c for _, coords in entries for c in coords] + list(spatial) \
        + _coordinates_attr(da)
    by_dim: dict[str, str] = {}
    for c in candidates:
        var = ds.variables.get(c)
        if var is None or var.ndim != 1 or str(var.dims[0]) not in spatial \
                or var.dtype.kind not in "fiu" or str(var.dims[0]) in by_dim:
            continue
        if _is_lat(c, var, strict=True) or _is_lon(c, var, strict=True):
            continue  # geographic latitude/longitude: not projection x/y
        by_dim[str(var.dims[0])] = c
    if len(by_dim) != 2:
        return None, None, None
    a, b = (by_dim[d] for d in spatial)

    def role(n):
        var = ds.variables[n]
        std, axis = _attr(var, "standard_name"), _attr(var, "axis")
        return "x" if std in X_NAMES or axis == "x" else "y" if std in Y_NAMES or \
            axis == "y" else ""

    x_name, y_name = (a, b) if role(a) == "x" or role(b) == "y" else (b, a)
    mapping = None
    guessed = False
    if not entries and {_attr(ds.variables[x_name], "standard_name"),
                        _attr(ds.variables[y_name], "standard_name")} & (X_NAMES | Y_NAMES):
        # CF x/y that need a mapping, but the variable names none: the file's only one
        # is taken, and said (a tool may have dropped the attribute).
        lone = [str(v) for v, var in ds.variables.items() if "grid_mapping_name" in var.attrs]
        if len(lone) == 1:
            entries, guessed = [(lone[0], [])], True
    usable = [(m, coords) for m, coords in entries if m in ds.variables]
    for m, _ in entries:
        if m not in ds.variables:
            log.warning("%s: grid_mapping '%s' of '%s' is not a variable of the file; "
                        "ignored", where, m, name)
    pick = [m for m, coords in usable if not coords or {x_name, y_name} & set(coords)]
    if pick:
        try:
            mapping = read_grid_mapping(ds, pick[0], x_var=ds[x_name], y_var=ds[y_name],
                                        where=where, variable=name)
        except NcreelError as err:
            if not has_lat_lon:
                raise
            log.warning("%s; the file's own latitude/longitude place the cells, their "
                        "polygon corners are taken halfway between them", err)
    if guessed and mapping is not None:
        log.warning("%s: '%s' names no grid_mapping; the file's only grid mapping variable "
                    "%s is taken for its %s/%s; if that is wrong, set lat=NAME lon=NAME "
                    "to 2-D latitude/longitude variables", where, name, mapping.describe(),
                    x_name, y_name)
    return x_name, y_name, mapping


def _grid_note(where: str, name: str, lat_name, x_name, y_name, mapping, dims) -> None:
    """Say, once per open, how a grid without latitude/longitude variables is placed."""
    if lat_name is not None:
        return
    if mapping is not None:
        log.info("%s: '%s' is on a grid in %s/%s with grid mapping %s: latitude/longitude "
                 "computed from it", where, name, x_name, y_name, mapping.describe())
    elif x_name is not None:
        log.warning("%s: '%s' is on projection x/y (%s, %s) with neither a CF grid_mapping "
                    "nor latitude/longitude: drawn in its own x/y without a map, table "
                    "lat/lon NULL; add a grid_mapping variable, or set lat=NAME lon=NAME to "
                    "2-D latitude/longitude variables", where, name, x_name, y_name)
    else:
        log.warning("%s: '%s' has no latitude/longitude coordinates ncreel can find: "
                    "drawn in grid indices (%s, %s) without a map, table lat/lon NULL; name "
                    "them with lat=NAME lon=NAME", where, name, *dims)


def wrap_longitude(d: np.ndarray) -> np.ndarray:
    """Fold longitude differences into [-180, 180) degrees.

    Parameters
    ----------
    d : array_like
        Differences of longitudes, degrees, any shape.

    Returns
    -------
    numpy.ndarray, same shape, float64
    """
    return (np.asarray(d, dtype=np.float64) + 180.0) % 360.0 - 180.0


def _mean_abs(a: np.ndarray) -> float:
    return float(np.nanmean(np.abs(a))) if a.size and np.isfinite(a).any() else 0.0


def _grid_dims(ds: xr.Dataset, spatial: list[str], lat_name: str | None,
               lon_name: str | None, tdim: str) -> tuple[str, str]:
    """``(y_dim, x_dim)``: y along which latitude changes, x along which longitude changes.

    Without latitude/longitude: the dimension with CF ``axis: Y`` (or a y-like name) is y;
    when nothing decides, the file's order (first spatial dimension is y).
    """
    a, b = spatial
    if lat_name is not None:
        la, lo = ds[lat_name], ds[lon_name]
        if tdim in la.dims:
            la = la.isel({tdim: 0})
        if tdim in lo.dims:
            lo = lo.isel({tdim: 0})
        if la.ndim == 1 and lo.ndim == 1 and la.dims != lo.dims:
            return str(la.dims[0]), str(lo.dims[0])
        lat2 = np.asarray(la.broadcast_like(lo).transpose(a, b).values, np.float64)
        lon2 = np.asarray(lo.broadcast_like(la).transpose(a, b).values, np.float64)
        dlon = [_mean_abs(wrap_longitude(np.diff(lon2, axis=k))) for k in (0, 1)]
        along_a = _mean_abs(np.diff(lat2, axis=0)) + dlon[1]
        along_b = _mean_abs(np.diff(lat2, axis=1)) + dlon[0]
        return (b, a) if along_b > along_a else (a, b)

    def y_like(d):
        var = ds.variables.get(d)
        return (_attr(var, "axis") == "y" if var is not None and _attr(var, "axis")
                else d.lower() in _LAT_NAMES)

    def x_like(d):
        var = ds.variables.get(d)
        return (_attr(var, "axis") == "x" if var is not None and _attr(var, "axis")
                else d.lower() in _LON_NAMES)

    if y_like(b) and x_like(a) and not (y_like(a) and x_like(b)):
        return b, a
    return a, b


def _grid_array(ds: xr.Dataset, name: str, y_dim: str, x_dim: str,
                tdim: str | None) -> np.ndarray:
    """Coordinate `name` as a float64 ``(ny, nx)`` array in file order (first time step)."""
    var = ds[name]
    if tdim in var.dims:
        var = var.isel({tdim: 0})
    full = xr.DataArray(np.zeros((ds.sizes[y_dim], ds.sizes[x_dim])), dims=(y_dim, x_dim))
    return np.asarray(var.broadcast_like(full).transpose(y_dim, x_dim).values, np.float64)


def _check_constant(ds: xr.Dataset, name: str, tdim: str, where: str) -> None:
    var = ds[name]
    if tdim not in var.dims or var.sizes[tdim] < 2:
        return
    values = np.asarray(var.transpose(tdim, ...).values, np.float64)
    if not np.allclose(values, values[:1], equal_nan=True):
        raise NcreelError(f"{where}: coordinate '{name}' changes along '{tdim}' (a moving "
                          "grid); ncreel needs a grid fixed in time, split the file per grid")


def _across_seam(lon: np.ndarray, order: np.ndarray | None) -> np.ndarray | None:
    # Increasing longitudes of a box stored across the 0/360 seam (0.5, 325.5 ... 355.5):
    # the columns start after the widest gap between neighbours, so that the box reads
    # west to east (325.5 ... 355.5, 0.5) and is drawn as one piece. Global grids and
    # boxes stored in one piece have no gap wider than the one round the seam: unchanged.
    idx = np.arange(lon.size) if order is None else order
    v = np.asarray(lon, np.float64)[idx]
    if v.size < 2 or not np.all(np.diff(v) > 0) or v[-1] - v[0] >= 360:
        return order
    gaps = np.diff(v)
    k = int(np.argmax(gaps))
    if gaps[k] <= v[0] + 360.0 - v[-1] + 1e-6:
        return order
    rolled = np.roll(idx, -(k + 1))
    # A sorted file stored from its seam (355.5 ... then 0.5 first) rolls back to its own
    # order: read as stored.
    return None if np.array_equal(rolled, np.arange(lon.size)) else rolled


def _orientation(ds: xr.Dataset, lat_name: str, lon_name: str, y_dim: str, x_dim: str,
                 tdim: str) -> tuple[np.ndarray | None, np.ndarray | None]:
    """Row and column order that puts south at the bottom and longitudes increasing."""
    lat = _grid_array(ds, lat_name, y_dim, x_dim, tdim)
    lon = _grid_array(ds, lon_name, y_dim, x_dim, tdim)
    one_d = {d for d in (ds[lat_name].dims + ds[lon_name].dims) if d != tdim}
    y_index = x_index = None
    if len(one_d) == 2 and ds[lat_name].ndim - (tdim in ds[lat_name].dims) == 1:
        # Rectilinear: sort each axis (a ±180 axis stored from 0 eastwards is rolled).
        for axis_values, is_y in ((lat[:, 0], True), (lon[0, :], False)):
            if np.all(np.diff(axis_values) > 0):
                continue
            order = np.argsort(axis_values, kind="stable")
            if np.all(np.diff(axis_values[order]) > 0):
                if is_y:
                    y_index = order
                else:
                    x_index = order
        x_index = _across_seam(lon[0, :], x_index)
        return y_index, x_index
    if np.nanmean(np.diff(lat, axis=0)) < 0:
        y_index = np.arange(lat.shape[0])[::-1].copy()
    if np.nanmean(wrap_longitude(np.diff(lon, axis=1))) < 0:
        x_index = np.arange(lon.shape[1])[::-1].copy()
    return y_index, x_index
