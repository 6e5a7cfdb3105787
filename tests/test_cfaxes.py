"""CF axis detection (ncreel.input.cfaxes): which variables are latitude, longitude, x and y.

Through files written small here (tests/grid_files.py) and directly on the rules.
"""

from __future__ import annotations

import logging

import numpy as np
import pytest
import xarray as xr
from grid_files import write_latlon2d_no_attributes, write_rotated_pole
from ncreel.core.errors import NcreelError
from ncreel.input.cfaxes import _is_lat, _is_lon, _is_spatial, cf_bounds, wrap_longitude
from ncreel.input.source import open_series


def test_rotated_coordinates_are_never_latitude_longitude(tmp_path):
    path, _ = write_rotated_pole(tmp_path / "r.nc")
    with pytest.raises(NcreelError, match="config key 'lat': 'rlat' is a grid_latitude"):
        open_series(str(path), "tas", lat="rlat", lon="rlon")


def test_implausible_values_are_not_taken_as_latitude(tmp_path):
    path, _ = write_latlon2d_no_attributes(tmp_path / "a.nc")
    import xarray as xr

    with xr.open_dataset(path) as ds:
        ds = ds.load()
    ds["lat2d"] = ds["lat2d"] * 10  # 400..460: not latitudes
    # Fields whose names start like lat/lon, with values that could be degrees: not taken.
    ds["latent"] = ds["lat2d"] / 10
    ds["long_wave"] = ds["v"] / 10
    ds["lat_t"] = ds["lon2d"].assign_attrs(units="W m-2")
    ds.to_netcdf(tmp_path / "b.nc")
    with open_series(str(tmp_path / "b.nc"), "v") as s:
        assert s.lat_name is None and not s.has_lat_lon


def test_grid_indices_are_said(tmp_path, caplog):
    path, _ = write_latlon2d_no_attributes(tmp_path / "i.nc", indices_only=True)
    with caplog.at_level(logging.WARNING, logger="ncreel"), open_series(str(path), "v") as s:
        notes = [r.getMessage() for r in caplog.records]
        assert len(notes) == 1 and "drawn in grid indices" in notes[0]
        assert "lat=NAME lon=NAME" in notes[0]
        assert not s.has_lat_lon



def _var(**attrs):
    return xr.Variable(("n",), np.zeros(2), attrs)


@pytest.mark.parametrize("name, attrs, lat, lon", [
    ("anything", {"standard_name": "latitude"}, True, False),
    ("anything", {"units": "degrees_north"}, True, False),
    ("anything", {"units": "degree_E"}, False, True),
    ("lat", {}, True, False),
    ("longitude", {}, False, True),
    ("y", {"axis": "Y"}, True, False),  # loose: axis Y
    # Rotated-pole axes are not geographic (CF 4.1/4.2 standard names grid_latitude...).
    ("rlat", {"standard_name": "grid_latitude", "units": "degrees"}, False, False),
    ("temperature", {"units": "K"}, False, False),
])
def test_latitude_longitude_by_cf_attributes_and_names(name, attrs, lat, lon):
    var = _var(**attrs)
    assert (_is_lat(name, var), _is_lon(name, var)) == (lat, lon)


def test_strict_names_ignore_axis_attributes():
    # A configured or candidate name is latitude by CF attributes or a strict name only.
    assert not _is_lat("y", _var(axis="Y"), strict=True)
    assert _is_lat("latitude", _var(), strict=True)
    assert _is_lon("nav_lon", _var(), strict=True)  # NEMO


def test_spatial_dimensions_include_projection_axes():
    assert _is_spatial("x", _var(standard_name="projection_x_coordinate"))
    assert _is_spatial("rlon", _var(standard_name="grid_longitude"))
    assert _is_spatial("south_north", None)  # WRF, by name
    assert not _is_spatial("level", _var(units="m"))


def test_wrap_longitude_maps_into_minus_180_to_180():
    d = np.array([-540.0, -180.0, 0.0, 179.5, 180.0, 359.0, 720.25])
    np.testing.assert_array_equal(wrap_longitude(d),
                                  [-180.0, -180.0, 0.0, 179.5, -180.0, -1.0, 0.25])


def test_cf_bounds_are_read_from_the_bounds_attribute():
    ds = xr.Dataset({"lat": ("lat", [0.5, 1.5], {"bounds": "lat_bnds"}),
                     "lat_bnds": (("lat", "nv"), [[0.0, 1.0], [1.0, 2.0]]),
                     "lon": ("lon", [10.0, 11.0])})
    np.testing.assert_array_equal(cf_bounds(ds, "lat"), [[0.0, 1.0], [1.0, 2.0]])
    assert cf_bounds(ds, "lon") is None
