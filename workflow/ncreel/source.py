"""Open a NetCDF time series (one file or a glob of files split along time) lazily.

Only the header is read when a :class:`Series` is opened; :meth:`Series.read` reads one
slice of time steps, so memory is bounded by the slice, never by the whole series.
"""

from __future__ import annotations

import glob
import logging
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import cftime
import numpy as np
import xarray as xr

from ncreel.errors import NcreelError

log = logging.getLogger(__name__)

# CF conventions section 4: how latitude/longitude and X/Y axes are recognised.
_LAT_NAMES = {"lat", "latitude", "nav_lat", "rlat", "y", "yc", "south_north", "nlat", "j"}
_LON_NAMES = {"lon", "longitude", "nav_lon", "rlon", "x", "xc", "west_east", "nlon", "i"}
_LAT_UNITS = {"degrees_north", "degree_north", "degree_n", "degrees_n", "degreen", "degreesn"}
_LON_UNITS = {"degrees_east", "degree_east", "degree_e", "degrees_e", "degreee", "degreese"}
# CF calendars that PostgreSQL's proleptic-Gregorian `timestamp` type can hold exactly.
GREGORIAN_CALENDARS = {"standard", "gregorian", "proleptic_gregorian"}


@dataclass(frozen=True)
class TimeAxis:
    """The time coordinate of a series.

    Attributes
    ----------
    values : numpy.ndarray, shape (n_time,), float64
        Raw numeric coordinate values as stored (``time_value`` column); NaN where absent.
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
    """

    values: np.ndarray
    labels: list
    calendar: str
    units: str
    decoded: bool
    note: str = ""

    @property
    def postgres_type(self) -> str:
        """PostgreSQL type for the ``time`` column.

        ``timestamp`` holds only the proleptic Gregorian calendar; 360-day, noleap and other
        CF calendars have dates such as 2000-02-30 that it rejects, and CF ``standard``
        dates before 1582-10-15 are Julian, so those are ``text`` (ISO 8601 strings).
        """
        if not self.decoded or self.calendar not in GREGORIAN_CALENDARS:
            return "text"
        # CF 'standard' is Julian before 1582-10-15; PostgreSQL is proleptic Gregorian.
        if self.calendar != "proleptic_gregorian" and min(self.labels) < "1582-10-15":
            return "text"
        return "timestamp without time zone"


@dataclass
class Series:
    """A lazily opened ``(time, y, x)`` variable spread over one or more NetCDF files.

    Use :func:`open_series` to build one.
    """

    paths: tuple[str, ...]
    variable: str
    time_dim: str
    y_dim: str
    x_dim: str
    select: dict
    counts: tuple[int, ...]
    ny: int
    nx: int
    dtype: np.dtype
    units: str
    long_name: str
    _datasets: list = field(default_factory=list, repr=False)

    @property
    def n_time(self) -> int:
        """Total number of time steps over all files."""
        return int(sum(self.counts))

    @property
    def shape(self) -> tuple[int, int, int]:
        """``(n_time, ny, nx)``."""
        return (self.n_time, self.ny, self.nx)

    def _dataset(self, i: int) -> xr.Dataset:
        if self._datasets[i] is None:
            self._datasets[i] = _open(self.paths[i])
        return self._datasets[i]

    def read(self, start: int, stop: int) -> np.ndarray:
        """Read time steps ``start:stop`` as a float array with NaN for missing cells.

        ``_FillValue``/``missing_value`` become NaN and ``scale_factor``/``add_offset`` are
        applied (CF section 8.1) by xarray's mask-and-scale decoding.

        Parameters
        ----------
        start, stop : int
            Half-open range of global time indices, ``0 <= start <= stop <= n_time``.

        Returns
        -------
        numpy.ndarray, shape (stop - start, ny, nx)
            float32 for float32 or packed 8/16-bit data, float64 otherwise; in the variable's units.
        """
        if not 0 <= start <= stop <= self.n_time:
            raise ValueError(f"time slice {start}:{stop} outside 0:{self.n_time}")
        parts = []
        offset = 0
        for i, count in enumerate(self.counts):
            lo, hi = max(start - offset, 0), min(stop - offset, count)
            if lo < hi:
                da = self._dataset(i)[self.variable]
                da = da.isel({self.time_dim: slice(lo, hi), **self.select})
                try:
                    parts.append(da.transpose(self.time_dim, self.y_dim, self.x_dim).values)
                except (RuntimeError, OSError) as err:  # netCDF4's bare "NetCDF: HDF error"
                    raise NcreelError(
                        f"input '{self.paths[i]}': variable '{self.variable}': cannot read "
                        f"time steps {lo}..{hi - 1} of this file ({err}); the file is "
                        "corrupt: replace it with a good copy") from err
            offset += count
        if not parts:
            return np.empty((0, self.ny, self.nx), dtype=self.dtype)
        block = parts[0] if len(parts) == 1 else np.concatenate(parts, axis=0)
        if not np.issubdtype(block.dtype, np.floating):
            block = block.astype(np.float64)
        return block

    def read_variable(self, name: str, start: int, stop: int) -> np.ndarray:
        """Read another variable of the same files on the same grid (e.g. for a cell model).

        Parameters
        ----------
        name : str
            Variable with dims ``(time, y, x)`` or ``(y, x)`` (plus any dims in ``select``).
        start, stop : int
            Half-open range of global time indices (ignored for a ``(y, x)`` variable).

        Returns
        -------
        numpy.ndarray, float64
            Shape ``(stop - start, ny, nx)``, or ``(ny, nx)`` without a time dimension; NaN
            where missing (CF mask-and-scale applied).

        Raises
        ------
        NcreelError
            If the variable is missing or its dims are not the grid's (plus time).
        """
        ds = self._dataset(0)
        if name not in ds.variables:
            raise NcreelError(f"input '{self.paths[0]}': no variable '{name}' "
                              f"(variables: {', '.join(sorted(map(str, ds.data_vars)))})")
        da = ds[name]
        sel = {d: i for d, i in self.select.items() if d in da.dims}
        dims = set(da.dims) - set(sel)
        if dims == {self.y_dim, self.x_dim}:
            return np.asarray(da.isel(sel).transpose(self.y_dim, self.x_dim).values,
                              dtype=np.float64)
        if dims != {self.time_dim, self.y_dim, self.x_dim}:
            raise NcreelError(f"input '{self.paths[0]}': variable '{name}' has dims "
                              f"({', '.join(map(str, da.dims))}); need ({self.time_dim}, "
                              f"{self.y_dim}, {self.x_dim}) or ({self.y_dim}, {self.x_dim})")
        parts, offset = [], 0
        for i, count in enumerate(self.counts):
            lo, hi = max(start - offset, 0), min(stop - offset, count)
            if lo < hi:
                part = self._dataset(i)[name].isel({self.time_dim: slice(lo, hi), **sel})
                parts.append(np.asarray(
                    part.transpose(self.time_dim, self.y_dim, self.x_dim).values, np.float64))
            offset += count
        if not parts:
            return np.empty((0, self.ny, self.nx))
        return parts[0] if len(parts) == 1 else np.concatenate(parts, axis=0)

    def iter_blocks(self, start: int, stop: int, max_bytes: int = 64 * 2**20):
        """Yield ``(t0, block)`` for consecutive slices of ``start:stop``, each ≤ `max_bytes`.

        Parameters
        ----------
        start, stop : int
            Half-open range of global time indices.
        max_bytes : int
            Upper bound on one block's size in bytes (at least one time step is always read).

        Yields
        ------
        t0 : int
            Global index of the block's first time step.
        block : numpy.ndarray, shape (n, ny, nx)
            As returned by :meth:`read`.
        """
        step_bytes = max(self.ny * self.nx * 8, 1)
        n = max(1, int(max_bytes // step_bytes))
        for t0 in range(start, stop, n):
            yield t0, self.read(t0, min(t0 + n, stop))

    def time_axis(self) -> TimeAxis:
        """Return the concatenated time coordinate, decoded where CF allows.

        Decoding uses ``cftime.num2date`` with the file's ``units`` and ``calendar``, so
        360-day and other non-standard calendars keep their own dates. Units cftime cannot
        decode (``months since``, year-0 origins with a real-world calendar, missing units)
        fall back to the raw values, and :attr:`TimeAxis.note` says why.
        """
        values, labels, notes = [], [], []
        calendar, units = "standard", ""
        for i in range(len(self.paths)):
            ds = self._dataset(i)
            if self.time_dim in ds.variables:
                coord = ds[self.time_dim]
                raw = np.asarray(coord.values, dtype=np.float64).reshape(-1)
                attrs = coord.attrs
            else:
                raw = np.full(self.counts[i], np.nan)
                attrs = {}
            units = str(attrs.get("units", ""))
            calendar = str(attrs.get("calendar", "standard")).lower()
            values.append(raw)
            file_labels, note = _decode_time(raw, units, calendar)
            if note:
                notes.append(f"{self.paths[i]}: {note}")
            labels.extend(file_labels)
        decoded = not notes
        if not decoded:
            labels = [None] * self.n_time
        return TimeAxis(
            values=np.concatenate(values) if values else np.empty(0),
            labels=labels,
            calendar=calendar,
            units=units,
            decoded=decoded,
            note="; ".join(notes),
        )

    def cell_coordinates(self) -> tuple[np.ndarray | None, np.ndarray | None]:
        """Latitude and longitude of every cell centre.

        Returns
        -------
        lat, lon : numpy.ndarray, shape (ny, nx), float64, degrees; or None
            From 1-D latitude/longitude dimension coordinates, or from 2-D auxiliary
            coordinates (CF section 5.2, curvilinear grids) named in the variable's
            ``coordinates`` attribute or carrying a latitude/longitude ``standard_name``.
            ``None`` when the grid has neither (e.g. projected x/y only).
        """
        ds = self._dataset(0)
        ycoord = ds.variables.get(self.y_dim)
        xcoord = ds.variables.get(self.x_dim)
        if _is_lat(self.y_dim, ycoord) and _is_lon(self.x_dim, xcoord):
            lon, lat = np.meshgrid(np.asarray(xcoord.values, np.float64),
                                   np.asarray(ycoord.values, np.float64))
            return lat, lon
        lat = lon = None
        for name, var in ds.variables.items():
            if set(var.dims) != {self.y_dim, self.x_dim}:
                continue
            arr = var.transpose(self.y_dim, self.x_dim).values.astype(np.float64)
            if lat is None and _is_lat(name, var, strict=True):
                lat = arr
            elif lon is None and _is_lon(name, var, strict=True):
                lon = arr
        return lat, lon

    def close(self) -> None:
        """Close every file this series opened."""
        for ds in self._datasets:
            if ds is not None:
                ds.close()
        self._datasets = [None] * len(self.paths)

    def __enter__(self) -> Series:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def resolve_paths(input: str | Sequence[str]) -> list[str]:
    """Expand a NetCDF path, glob, or list of them into a sorted list of existing files.

    Raises
    ------
    NcreelError
        If nothing matches or a named file does not exist.
    """
    patterns = [input] if isinstance(input, str | os.PathLike) else list(input)
    if not patterns or patterns == [""]:
        raise NcreelError("config key 'input': no NetCDF path given (set input=PATH or a glob)")
    paths: list[str] = []
    for pattern in patterns:
        pattern = os.fspath(pattern)
        matches = sorted(glob.glob(pattern)) if glob.has_magic(pattern) else [pattern]
        if not matches:
            raise NcreelError(f"input '{pattern}': no file matches this glob")
        for path in matches:
            if not os.path.isfile(path):
                raise NcreelError(f"input '{path}': file not found")
            paths.append(path)
    return paths


def _open(path: str) -> xr.Dataset:
    try:
        # decode_times=False: time is decoded by us, so undecodable units never fail the open.
        return xr.open_dataset(path, decode_times=False, mask_and_scale=True, cache=False)
    except Exception as err:  # netCDF4/h5 raise many types; the user needs the file name
        raise NcreelError(f"input '{path}': not a readable NetCDF file ({err})") from err


def _attr(var, key: str) -> str:
    return str(getattr(var, "attrs", {}).get(key, "")).strip().lower()


# CF section 4.1/4.2: (standard names, units, names when strict, axis, loose names).
_AXES = {
    "lat": ({"latitude", "grid_latitude"}, _LAT_UNITS, {"lat", "latitude", "nav_lat", "xlat"},
            "y", {"lat", "latitude"}),
    "lon": ({"longitude", "grid_longitude"}, _LON_UNITS, {"lon", "longitude", "nav_lon",
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
                            or _attr(var, "standard_name").startswith("projection_")):
        return True
    return name.lower() in _LAT_NAMES | _LON_NAMES


def _is_time(name: str, var) -> bool:
    if var is None:
        return False
    return (_attr(var, "axis") == "t" or _attr(var, "standard_name") == "time"
            or " since " in f" {_attr(var, 'units')} ")


def detect_time_dim(ds: xr.Dataset, variable: str, time_dim: str | None = None,
                    select: Mapping | None = None, source: str = "") -> str:
    """Find the time dimension of `variable`.

    In order: the configured `time_dim`; the one dimension whose coordinate has CF
    ``axis: T``, ``standard_name: time`` or units containing ``since``; else the one
    dimension that is neither latitude/longitude/x/y-like nor in `select`.

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
        If `time_dim` is not a dimension of the variable, or there is no or more than one
        candidate; the message lists the variable's dimensions.
    """
    dims = list(ds[variable].dims)
    select = dict(select or {})
    where = f"{source}: " if source else ""
    if time_dim:
        if time_dim not in dims:
            raise NcreelError(f"{where}config key 'time_dim': '{time_dim}' is not a dimension of "
                              f"'{variable}' (its dims: {', '.join(dims)})")
        return time_dim
    cf = [d for d in dims if d not in select and _is_time(d, ds.variables.get(d))]
    if len(cf) == 1:
        return cf[0]
    if len(cf) > 1:
        raise NcreelError(f"{where}variable '{variable}': ambiguous time dimension, candidates "
                          f"{', '.join(cf)} (its dims: {', '.join(dims)}); set time_dim=NAME")
    rest = [d for d in dims if d not in select and not _is_spatial(d, ds.variables.get(d))]
    if len(rest) == 1:
        return rest[0]
    what = "no" if not rest else "ambiguous"
    raise NcreelError(f"{where}variable '{variable}': {what} time dimension found among its dims "
                      f"({', '.join(dims)}); set time_dim=NAME")


def open_series(input: str | Sequence[str], variable: str, *, time_dim: str | None = None,
                select: Mapping[str, int] | None = None) -> Series:
    """Open `variable` over one or more NetCDF files lazily, validating its shape.

    Multiple files (a glob) are joined along time in sorted file-name order; each must
    have the same grid.

    Parameters
    ----------
    input : str or sequence of str
        NetCDF path, glob, or list of them.
    variable : str
        Name of the data variable to show.
    time_dim : str, optional
        Time dimension name; detected when omitted (see :func:`detect_time_dim`).
    select : mapping of str to int, optional
        Index to pick along each extra dimension (e.g. ``{"level": 0}``).

    Returns
    -------
    Series
        With ``shape == (n_time, ny, nx)``.

    Raises
    ------
    NcreelError
        Missing file, unknown variable (lists the variables), no/ambiguous time dimension
        (lists the dims), a variable that is not 2-D per time step (lists the extra dims),
        a bad `select`, an empty time axis, or files whose grids differ.
    """
    paths = resolve_paths(input)
    select = {str(k): v for k, v in dict(select or {}).items()}
    first = _open(paths[0])
    try:
        if not variable:
            raise NcreelError("config key 'variable': no variable given (set variable=NAME)")
        if variable not in first.data_vars and variable not in first.variables:
            names = ", ".join(sorted(str(v) for v in first.data_vars)) or "none"
            raise NcreelError(f"input '{paths[0]}': no variable '{variable}' "
                              f"(variables: {names})")
        da = first[variable]
        tdim = detect_time_dim(first, variable, time_dim, select, source=f"input '{paths[0]}'")
        for dim, index in select.items():
            if dim not in da.dims:
                raise NcreelError(f"config key 'select': '{dim}' is not a dimension of "
                                  f"'{variable}' (its dims: {', '.join(map(str, da.dims))})")
            if dim == tdim:
                raise NcreelError(f"config key 'select': '{dim}' is the time dimension")
            if not isinstance(index, int) or isinstance(index, bool) or not (
                    -da.sizes[dim] <= index < da.sizes[dim]):
                raise NcreelError(f"config key 'select': {dim}={index!r} must be an integer "
                                  f"index in 0..{da.sizes[dim] - 1}")
        spatial = [d for d in da.dims if d != tdim and d not in select]
        if len(spatial) != 2:
            extra = [d for d in spatial if not _is_spatial(d, first.variables.get(d))]
            if len(spatial) > 2:
                raise NcreelError(
                    f"input '{paths[0]}': variable '{variable}' is not 2-D per time step: extra "
                    f"dims {', '.join(map(str, extra or spatial))} (sizes "
                    f"{', '.join(f'{d}={da.sizes[d]}' for d in (extra or spatial))}); "
                    f"pick one index of each with config key select, e.g. "
                    f"--config 'select={{{(extra or spatial)[0]}: 0}}'")
            raise NcreelError(f"input '{paths[0]}': variable '{variable}' has dims "
                              f"({', '.join(map(str, da.dims))}); need time plus two spatial "
                              "dims (y, x)")
        y_dim, x_dim = (str(d) for d in spatial)
        ny, nx = int(da.sizes[y_dim]), int(da.sizes[x_dim])
        # float32 stays float32 (halves memory); packed ints decode to float via xarray.
        dtype = np.dtype(np.float32) if da.dtype == np.float32 else np.dtype(np.float64)
        units = str(da.attrs.get("units", ""))
        long_name = str(da.attrs.get("long_name") or da.attrs.get("standard_name") or variable)
        counts = [int(da.sizes[tdim])]
        datasets = [first]
        for path in paths[1:]:
            ds = _open(path)
            datasets.append(ds)
            if variable not in ds.variables:
                raise NcreelError(f"input '{path}': no variable '{variable}' "
                                  f"(it is in '{paths[0]}')")
            other = ds[variable]
            if tdim not in other.dims:
                raise NcreelError(f"input '{path}': '{variable}' has no dimension '{tdim}'")
            if (int(other.sizes.get(y_dim, -1)), int(other.sizes.get(x_dim, -1))) != (ny, nx):
                raise NcreelError(f"input '{path}': grid of '{variable}' differs from "
                                  f"'{paths[0]}' (expected {y_dim}={ny}, {x_dim}={nx})")
            counts.append(int(other.sizes[tdim]))
    except BaseException:
        first.close()
        raise
    series = Series(paths=tuple(paths), variable=variable, time_dim=tdim, y_dim=y_dim,
                    x_dim=x_dim, select=select, counts=tuple(counts), ny=ny, nx=nx,
                    dtype=dtype, units=units, long_name=long_name, _datasets=datasets)
    if series.n_time == 0:
        series.close()
        raise NcreelError(f"input '{paths[0]}': time dimension '{tdim}' of '{variable}' "
                          "is empty (0 steps)")
    return series


def _decode_time(raw: np.ndarray, units: str, calendar: str) -> tuple[list, str]:
    if not units or " since " not in f" {units.lower()} ":
        return [None] * len(raw), f"time units {units!r} are not CF 'UNIT since DATE'"
    if not np.all(np.isfinite(raw)):
        return [None] * len(raw), "time coordinate has missing values"
    try:
        dates = cftime.num2date(raw, units, calendar=calendar, only_use_cftime_datetimes=True)
    except Exception as err:  # cftime raises ValueError/TypeError/… for many unit oddities
        return [None] * len(raw), (f"cannot decode time units {units!r} calendar "
                                   f"{calendar!r} ({err})")
    return [d.isoformat() for d in np.atleast_1d(dates)], ""
