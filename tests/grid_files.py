"""Small NetCDF files on grids in projection x/y with a CF grid mapping (CF 5.6, Appendix F).

Each writer returns the path and the truth: the field ``(time, y, x)`` with y and x
increasing, the x/y centres, and the geographic latitude/longitude of the cell centres
computed independently of ncreel (the rotated-pole formula, or pyproj from a PROJ string
or EPSG code rather than from the CF attributes ncreel reads).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import xarray as xr
from layouts import LAT_ATTRS, LON_ATTRS, field, time_coord

#: CORDEX EUR-11's rotated pole.
POLE_LAT, POLE_LON = 39.25, -162.0


def unrotate(rlon, rlat, pole_lon=POLE_LON, pole_lat=POLE_LAT):
    """Geographic (lon, lat) of rotated-pole (rlon, rlat), degrees: two rotations of the sphere.

    The rotated frame's point (0, 0) is (pole_lon + 180, 90 - pole_lat) geographic, and its
    north pole is (pole_lon, pole_lat).
    """
    lam, phi = np.deg2rad(rlon), np.deg2rad(rlat)
    x, y, z = np.cos(phi) * np.cos(lam), np.cos(phi) * np.sin(lam), np.sin(phi)
    theta, turn = np.deg2rad(90.0 - pole_lat), np.deg2rad(pole_lon + 180.0)
    x1, z1 = np.cos(theta) * x - np.sin(theta) * z, np.sin(theta) * x + np.cos(theta) * z
    x2, y2 = np.cos(turn) * x1 - np.sin(turn) * y, np.sin(turn) * x1 + np.cos(turn) * y
    lon = np.rad2deg(np.arctan2(y2, x2))
    return (lon + 180.0) % 360.0 - 180.0, np.rad2deg(np.arcsin(np.clip(z1, -1, 1)))


def rotated_axes(ny: int = 6, nx: int = 8, step: float = 5.5):
    """Rotated latitudes/longitudes (degrees) spanning EUR-11's domain in `ny` x `nx` cells."""
    rlat = -23.375 + step / 2 + step * np.arange(ny)
    rlon = -28.375 + step / 2 + step * np.arange(nx)
    return rlat, rlon


def write_rotated_pole(path: Path, *, ny: int = 6, nx: int = 8, step: float = 5.5,
                       n_time: int = 2, aux_latlon: bool = False, bounds: bool = False,
                       extended: bool = False, north_first: bool = False,
                       mapping: dict | None = None) -> tuple[Path, dict]:
    """A CORDEX-like ``tas(time, rlat, rlon)`` with a ``rotated_latitude_longitude`` mapping.

    `aux_latlon` adds the 2-D ``lat``/``lon`` auxiliary coordinates CORDEX files carry;
    `bounds` adds ``rlat_bnds``/``rlon_bnds``; `extended` writes ``grid_mapping`` in CF's
    extended form (``rotated_pole: rlon rlat``); `north_first` stores rlat decreasing.
    """
    rlat, rlon = rotated_axes(ny, nx, step)
    truth = field(n_time, ny, nx)
    stored, rlat_s = (truth[:, ::-1], rlat[::-1]) if north_first else (truth, rlat)
    lon2, lat2 = unrotate(*np.meshgrid(rlon, rlat))
    gm = mapping if mapping is not None else {
        "grid_mapping_name": "rotated_latitude_longitude",
        "grid_north_pole_latitude": POLE_LAT, "grid_north_pole_longitude": POLE_LON}
    attrs = {"units": "K", "standard_name": "air_temperature",
             "grid_mapping": "rotated_pole: rlon rlat" if extended else "rotated_pole"}
    coords = {"time": time_coord(n_time),
              "rlat": ("rlat", rlat_s, {"standard_name": "grid_latitude", "units": "degrees",
                                        "axis": "Y", "long_name": "latitude in rotated pole "
                                                                  "grid"}),
              "rlon": ("rlon", rlon, {"standard_name": "grid_longitude", "units": "degrees",
                                      "axis": "X", "long_name": "longitude in rotated pole "
                                                                "grid"})}
    data_vars = {"tas": (("time", "rlat", "rlon"), stored, attrs),
                 "rotated_pole": ((), np.int32(0), gm)}
    if aux_latlon:
        lat_s = lat2[::-1] if north_first else lat2
        lon_s = lon2[::-1] if north_first else lon2
        coords["lat"] = (("rlat", "rlon"), lat_s, dict(LAT_ATTRS))
        coords["lon"] = (("rlat", "rlon"), lon_s, dict(LON_ATTRS))
        attrs["coordinates"] = "lat lon"
    if bounds:
        for name, c in (("rlat", rlat_s), ("rlon", rlon)):
            d = np.sign(c[-1] - c[0]) * step / 2
            data_vars[f"{name}_bnds"] = ((name, "bnds"), np.stack([c - d, c + d], 1))
            coords[name][2]["bounds"] = f"{name}_bnds"
    ds = xr.Dataset(data_vars, coords=coords)
    ds.to_netcdf(path)
    return path, {"field": truth, "rlat": rlat, "rlon": rlon, "lat": lat2, "lon": lon2}


#: WRF-like Lambert conformal conic on WRF's sphere, as a PROJ string (the truth's CRS).
LCC_PROJ = "+proj=lcc +lat_1=30 +lat_2=60 +lat_0=39 +lon_0=-98 +R=6370000 +units=m +no_defs"


def write_lambert(path: Path, *, ny: int = 5, nx: int = 7, dx_km: float = 600.0,
                  n_time: int = 2) -> tuple[Path, dict]:
    """``T2(time, y, x)`` on a Lambert conformal grid over North America, x/y in km."""
    from pyproj import Transformer

    y = (np.arange(ny) - (ny - 1) / 2) * dx_km
    x = (np.arange(nx) - (nx - 1) / 2) * dx_km
    truth = field(n_time, ny, nx)
    gm = {"grid_mapping_name": "lambert_conformal_conic", "standard_parallel": [30.0, 60.0],
          "longitude_of_central_meridian": -98.0, "latitude_of_projection_origin": 39.0,
          "earth_radius": 6370000.0, "false_easting": 0.0, "false_northing": 0.0}
    xr.Dataset(
        {"T2": (("time", "y", "x"), truth, {"units": "K", "grid_mapping": "Lambert_Conformal"}),
         "Lambert_Conformal": ((), np.int32(0), gm)},
        coords={"time": time_coord(n_time),
                "y": ("y", y, {"standard_name": "projection_y_coordinate", "units": "km"}),
                "x": ("x", x, {"standard_name": "projection_x_coordinate", "units": "km"})},
    ).to_netcdf(path)
    t = Transformer.from_crs(LCC_PROJ, "+proj=longlat +R=6370000 +no_defs", always_xy=True)
    lon, lat = t.transform(*np.meshgrid(x * 1000.0, y * 1000.0))
    xe = np.concatenate([[x[0] - dx_km / 2], x + dx_km / 2]) * 1000.0
    ye = np.concatenate([[y[0] - dx_km / 2], y + dx_km / 2]) * 1000.0
    clon, clat = t.transform(*np.meshgrid(xe, ye))
    return path, {"field": truth, "x": x, "y": y, "lat": lat, "lon": lon,
                  "corner_lon": clon, "corner_lat": clat}


def write_polar_stereographic(path: Path, *, ny: int = 6, nx: int = 6, n_time: int = 2,
                              dx_m: float = 800_000.0) -> tuple[Path, dict]:
    """``sic(time, y, x)`` on NSIDC's north polar stereographic grid (EPSG:3413), x/y in m."""
    from pyproj import Transformer

    y = (np.arange(ny) - (ny - 1) / 2) * dx_m
    x = (np.arange(nx) - (nx - 1) / 2) * dx_m
    truth = field(n_time, ny, nx)
    gm = {"grid_mapping_name": "polar_stereographic", "straight_vertical_longitude_from_pole":
          -45.0, "latitude_of_projection_origin": 90.0, "standard_parallel": 70.0,
          "false_easting": 0.0, "false_northing": 0.0, "semi_major_axis": 6378137.0,
          "inverse_flattening": 298.257223563}
    xr.Dataset(
        {"sic": (("time", "y", "x"), truth, {"units": "1", "grid_mapping": "crs"}),
         "crs": ((), np.int32(0), gm)},
        coords={"time": time_coord(n_time),
                "y": ("y", y, {"standard_name": "projection_y_coordinate", "units": "m"}),
                "x": ("x", x, {"standard_name": "projection_x_coordinate", "units": "m"})},
    ).to_netcdf(path)
    lon, lat = Transformer.from_crs("EPSG:3413", "EPSG:4326", always_xy=True).transform(
        *np.meshgrid(x, y))
    return path, {"field": truth, "x": x, "y": y, "lat": lat, "lon": lon}


def write_projected_no_mapping(path: Path, *, n_time: int = 2) -> tuple[Path, dict]:
    """Projection x/y (m) with neither a grid mapping nor latitude/longitude."""
    y, x = np.array([0.0, 1e5, 2e5]), np.array([0.0, 1e5, 2e5, 3e5])
    truth = field(n_time, 3, 4)
    xr.Dataset({"v": (("time", "y", "x"), truth, {"units": "K"})},
               coords={"time": time_coord(n_time),
                       "y": ("y", y, {"standard_name": "projection_y_coordinate", "units": "m"}),
                       "x": ("x", x, {"standard_name": "projection_x_coordinate",
                                      "units": "m"})}).to_netcdf(path)
    return path, {"field": truth, "x": x, "y": y}


def write_latlon2d_no_attributes(path: Path, *, n_time: int = 2,
                                 indices_only: bool = False) -> tuple[Path, dict]:
    """``v(time, j, i)`` with 2-D ``lat2d``/``lon2d`` that have no attributes at all.

    `indices_only` leaves them out: the grid has nothing to place it.
    """
    j, i = np.meshgrid(np.arange(3), np.arange(4), indexing="ij")
    lat = 40.0 + 2.0 * j + 0.2 * i
    lon = 5.0 + 3.0 * i - 0.3 * j
    truth = field(n_time, 3, 4)
    coords = {"time": time_coord(n_time)}
    if not indices_only:
        coords.update({"lat2d": (("j", "i"), lat), "lon2d": (("j", "i"), lon)})
    xr.Dataset({"v": (("time", "j", "i"), truth, {"units": "K"})}, coords=coords
               ).reset_coords().to_netcdf(path)
    return path, {"field": truth, "lat": lat, "lon": lon}
