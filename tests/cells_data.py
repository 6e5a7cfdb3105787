"""Small synthetic NetCDF inputs for the per-cell table tests."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import xarray as xr


def write_risk_nc(path: Path, *, n_time: int = 6, ny: int = 3, nx: int = 4,
                  bounds: bool = True) -> Path:
    """(time, lat, lon) float32 'tas' plus 'intercept' (percent) with CF lat/lon bounds."""
    rng = np.random.default_rng(0)
    lat = np.linspace(40.0, 50.0, ny)
    lon = np.linspace(-10.0, 5.0, nx)
    tas = (280 + rng.normal(size=(n_time, ny, nx))).astype(np.float32)
    tas[1, 0, 0] = np.nan  # a missing cell: no row
    intercept = np.clip(rng.uniform(0, 100, size=(n_time, ny, nx)), 0, 100)
    intercept[2, 1, 1] = np.nan  # interception missing: NULL PEC/ETR/class
    ds = xr.Dataset(
        {"tas": (("time", "lat", "lon"), tas, {"units": "K", "long_name": "temperature"}),
         "intercept": (("time", "lat", "lon"), intercept, {"units": "percent"})},
        coords={"time": ("time", np.arange(n_time) * 30.0,
                         {"units": "days since 2000-01-01", "calendar": "standard"}),
                "lat": ("lat", lat, {"units": "degrees_north", "standard_name": "latitude"}),
                "lon": ("lon", lon, {"units": "degrees_east", "standard_name": "longitude"})})
    if bounds:
        dy, dx = (lat[1] - lat[0]) / 2, (lon[1] - lon[0]) / 2
        ds["lat_bnds"] = (("lat", "nv"), np.stack([lat - dy * 0.9, lat + dy * 0.9], axis=1))
        ds["lon_bnds"] = (("lon", "nv"), np.stack([lon - dx * 0.9, lon + dx * 0.9], axis=1))
        ds["lat"].attrs["bounds"] = "lat_bnds"
        ds["lon"].attrs["bounds"] = "lon_bnds"
    ds.to_netcdf(path)
    return path
