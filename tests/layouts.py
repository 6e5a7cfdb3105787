"""Small NetCDF files in the layouts real users have (rebuilt from public bug reports).

Each writer returns the path and the truth the test checks against: the field as a
``(time, lat, lon)``-ordered array with latitude increasing northward and longitude
eastward, the cell centres, and the ISO time labels.
"""

from __future__ import annotations

from pathlib import Path

import netCDF4
import numpy as np
import xarray as xr

LAT_ATTRS = {"units": "degrees_north", "standard_name": "latitude", "long_name": "latitude"}
LON_ATTRS = {"units": "degrees_east", "standard_name": "longitude", "long_name": "longitude"}


def field(n_time: int, ny: int, nx: int) -> np.ndarray:
    """Distinct values per step and cell: ``100 * t + 10 * iy + ix`` (float32)."""
    t, y, x = np.meshgrid(np.arange(n_time), np.arange(ny), np.arange(nx), indexing="ij")
    return (100.0 * t + 10.0 * y + x).astype(np.float32)


def time_coord(n: int, *, start: int = 0, calendar: str = "standard",
               units: str = "days since 2000-01-01") -> tuple:
    return ("time", np.arange(start, start + n, dtype=np.float64),
            {"units": units, "calendar": calendar, "standard_name": "time", "axis": "T"})


def write_rectilinear(path: Path, *, order=("time", "lat", "lon"), lat=None, lon=None,
                      n_time: int = 3, lat_attrs=None, lon_attrs=None, names=("lat", "lon"),
                      calendar: str = "standard", units: str = "days since 2000-01-01",
                      start: int = 0, long_name: str = "air temperature",
                      packed: bool = False, time_values=None,
                      time_fill: float | None = None) -> tuple[Path, dict]:
    """``tas`` on a 1-D lat/lon grid with its dimensions stored in `order`.

    `lat`/`lon` give the stored (possibly unsorted) centres; the truth is sorted.
    """
    lat = np.array([10.0, 20.0, 30.0] if lat is None else lat)
    lon = np.array([0.0, 40.0, 80.0, 120.0] if lon is None else lon)
    yn, xn = names
    truth = field(n_time, len(lat), len(lon))  # in sorted (south-north, west-east) order
    ys, xs = np.argsort(np.argsort(lat)), np.argsort(np.argsort(lon))
    stored = truth[:, ys][:, :, xs]  # stored[t, i, j] = truth at the stored lat i / lon j
    dims = {"time": "time", "lat": yn, "lon": xn}
    da = xr.DataArray(stored, dims=("time", yn, xn)).transpose(*(dims[d] for d in order))
    coords = {yn: (yn, lat, dict(LAT_ATTRS if lat_attrs is None else lat_attrs)),
              xn: (xn, lon, dict(LON_ATTRS if lon_attrs is None else lon_attrs))}
    tc = time_coord(n_time, start=start, calendar=calendar, units=units)
    if time_values is not None:
        tc = ("time", np.asarray(time_values), tc[2])
    coords["time"] = tc
    ds = xr.Dataset({"tas": (da.dims, da.values, {"units": "K", "long_name": long_name})},
                    coords=coords)
    encoding = {}
    if packed:
        encoding["tas"] = {"dtype": "int16", "scale_factor": 0.5, "add_offset": 100.0,
                           "_FillValue": -32767}
    if time_fill is not None:
        encoding["time"] = {"_FillValue": time_fill}
    ds.to_netcdf(path, encoding=encoding)
    return path, {"field": truth, "lat": np.sort(lat), "lon": np.sort(lon)}


def write_curvilinear(path: Path, *, ny: int = 3, nx: int = 5, n_time: int = 2,
                      lon0: float = 150.0, dlon: float = 10.0) -> tuple[Path, dict]:
    """``tas(time, y, x)`` with 2-D ``lat``/``lon`` whose rows cross the dateline (±180)."""
    iy, ix = np.meshgrid(np.arange(ny), np.arange(nx), indexing="ij")
    lon_cont = lon0 + dlon * ix + 2.0 * iy
    lon = (lon_cont + 180.0) % 360.0 - 180.0
    lat = -10.0 + 5.0 * iy + 0.5 * ix
    truth = field(n_time, ny, nx)
    ds = xr.Dataset(
        {"tas": (("time", "y", "x"), truth, {"units": "K", "coordinates": "lat lon"})},
        coords={"time": time_coord(n_time),
                "lat": (("y", "x"), lat, LAT_ATTRS), "lon": (("y", "x"), lon, LON_ATTRS)})
    ds.to_netcdf(path)
    return path, {"field": truth, "lat": lat, "lon": lon, "lon_cont": lon_cont}


def write_wrf(path: Path, *, n_time: int = 3, ny: int = 3, nx: int = 4, xtime: bool = True,
              moving: bool = False) -> tuple[Path, dict]:
    """A WRF-style file: ``Times`` char array, ``XTIME``, ``XLAT``/``XLONG(Time, y, x)``.

    ``T2`` is stored (Time, south_north, west_east) with latitude increasing northward.
    """
    labels = [f"2007-10-01T{3 * t:02d}:00:00" for t in range(n_time)]
    iy, ix = np.meshgrid(np.arange(ny), np.arange(nx), indexing="ij")
    lat = 30.0 + 1.0 * iy + 0.1 * ix
    lon = -100.0 + 1.5 * ix - 0.1 * iy
    truth = field(n_time, ny, nx)
    with netCDF4.Dataset(path, "w") as nc:
        nc.createDimension("Time", None)
        nc.createDimension("DateStrLen", 19)
        nc.createDimension("south_north", ny)
        nc.createDimension("west_east", nx)
        times = nc.createVariable("Times", "S1", ("Time", "DateStrLen"))
        times[:] = netCDF4.stringtochar(np.array([s.replace("T", "_") for s in labels], "S19"))
        if xtime:
            xt = nc.createVariable("XTIME", "f4", ("Time",))
            xt.units = "minutes since 2007-10-01 00:00:00"
            xt.description = "minutes since 2007-10-01 00:00:00"
            xt[:] = np.arange(n_time) * 180.0
        for name, arr, units in (("XLAT", lat, "degree_north"), ("XLONG", lon, "degree_east")):
            v = nc.createVariable(name, "f4", ("Time", "south_north", "west_east"))
            v.units = units
            v.MemoryOrder = "XY "
            data = np.repeat(arr[None], n_time, axis=0)
            if moving and name == "XLAT":
                data[-1] += 0.5
            v[:] = data
        t2 = nc.createVariable("T2", "f4", ("Time", "south_north", "west_east"))
        t2.units = "K"
        t2.description = "TEMP at 2 M"
        t2.coordinates = "XLONG XLAT XTIME" if xtime else "XLONG XLAT"
        t2[:] = truth
    return path, {"field": truth, "lat": lat, "lon": lon, "labels": labels}


def write_string_times(path: Path, texts: list[str], *, chars: bool = False) -> Path:
    """``v(time, lat, lon)`` whose ``time`` holds ISO 8601 strings (or a char array)."""
    n = len(texts)
    with netCDF4.Dataset(path, "w") as nc:
        nc.createDimension("time", n)
        nc.createDimension("lat", 2)
        nc.createDimension("lon", 3)
        if chars:
            nc.createDimension("strlen", 20)
            t = nc.createVariable("time", "S1", ("time", "strlen"))
            t[:] = netCDF4.stringtochar(np.array(texts, "S20"))
        else:
            t = nc.createVariable("time", str, ("time",))
            for i, s in enumerate(texts):
                t[i] = s
        for name, vals, attrs in (("lat", [0.0, 10.0], LAT_ATTRS), ("lon", [0.0, 10.0, 20.0],
                                                                    LON_ATTRS)):
            c = nc.createVariable(name, "f8", (name,))
            c.setncatts(attrs)
            c[:] = vals
        v = nc.createVariable("v", "f4", ("time", "lat", "lon"))
        v[:] = field(n, 2, 3)
    return path


def write_group(path: Path, source: Path | None = None) -> Path:
    """A NetCDF-4 file with the variables of `source` in group ``/forecast`` (root has none).

    `source` defaults to :func:`write_rectilinear`'s ``tas`` file.
    """
    p = source or write_rectilinear(path.with_suffix(".tmp.nc"))[0]
    with xr.open_dataset(p, decode_times=False) as ds:
        xr.Dataset(attrs={"title": "root"}).to_netcdf(path, mode="w")
        ds.load().to_netcdf(path, mode="a", group="forecast")
    p.unlink()
    return path


def write_ambiguous_lat(path: Path) -> dict:
    """``tas`` with two equally good latitudes: dimension coordinate ``lat`` and ``lat2``."""
    src, truth = write_rectilinear(path.with_suffix(".tmp.nc"))
    with xr.open_dataset(src) as ds:
        ds = ds.load()
    src.unlink()
    ds["lat2"] = ("lat", ds["lat"].values + 0.5, dict(LAT_ATTRS))
    ds["tas"].attrs["coordinates"] = "lat2"
    ds.reset_coords().to_netcdf(path)
    return truth
