"""Config sel: a level by its coordinate value (ncreel.input.coordsel), on real data."""

from __future__ import annotations

import numpy as np
import pytest
import xarray as xr
from conftest import plev_file
from ncreel.core.errors import NcreelError
from ncreel.input.coordsel import coordinate_index, resolve_sel
from ncreel.input.source import open_series


def test_850_hpa_by_value_reads_that_level(tmp_path, eofs_data):
    path = str(plev_file(eofs_data, tmp_path / "z_plev.nc"))
    for value in (85000, 85000.0, "85000", "850 hPa", "850 mbar", "0.85 bar"):
        assert resolve_sel(path, "z", {"plev": value}, {}) == {"plev": 1}, value
    with xr.open_dataset(path, decode_times=False) as ds:
        want = ds["z"].isel(plev=1, time=slice(0, 3)).values
    with open_series(path, "z", select=resolve_sel(path, "z", {"plev": "850 hPa"}, {})) as s:
        np.testing.assert_array_equal(s.read(0, 3), want)


def test_a_value_the_coordinate_lacks_names_the_nearest(tmp_path, eofs_data):
    path = str(plev_file(eofs_data, tmp_path / "z_plev.nc"))
    with pytest.raises(NcreelError) as err:
        resolve_sel(path, "z", {"plev": 85001}, {})
    assert str(err.value) == ("config key 'sel.plev': 85001 is not a value of coordinate "
                              "'plev' (Pa); the nearest are 85000 (index 1), 100000 (index "
                              "0), 50000 (index 2)")
    with pytest.raises(NcreelError, match=r"'sel.plev': 700 hPa \(70000 Pa\) is not a value"):
        resolve_sel(path, "z", {"plev": "700 hPa"}, {})
    with pytest.raises(NcreelError, match="cannot be converted to the coordinate's units 'Pa'"):
        resolve_sel(path, "z", {"plev": "850 K"}, {})


def test_sel_mistakes_stop_with_one_line(tmp_path, eofs_data):
    path = str(plev_file(eofs_data, tmp_path / "z_plev.nc"))
    with pytest.raises(NcreelError, match="'sel.plev' and 'select.plev' both choose"):
        resolve_sel(path, "z", {"plev": 85000}, {"plev": 1})
    with pytest.raises(NcreelError, match=r"'sel.level': 'level' is not a dimension of 'z' "
                       r"\(its dims: time, plev, latitude, longitude\)"):
        resolve_sel(path, "z", {"level": 1}, {})
    with pytest.raises(NcreelError, match="'time' is the time axis, whose steps are the "
                       "frames: choose steps with time_range"):
        resolve_sel(path, "z", {"time": 1}, {})
    ds = xr.Dataset({"v": (("time", "member", "y", "x"), np.zeros((2, 3, 2, 2)))},
                    coords={"time": ("time", [0.0, 1.0], {"units": "days since 2000-01-01"})})
    ds.to_netcdf(tmp_path / "nocoord.nc")
    with pytest.raises(NcreelError, match=r"dimension 'member' has no coordinate variable .* "
                       r"select: \{member: N\}"):
        resolve_sel(str(tmp_path / "nocoord.nc"), "v", {"member": 1}, {})


def test_text_coordinates_match_their_text():
    members = xr.DataArray(np.array(["r1i1p1f1", "r2i1p1f1"]), dims="member", name="member")
    assert coordinate_index(members, "r2i1p1f1", key="sel.member", dim="member") == 1
    with pytest.raises(NcreelError, match="r3i1p1f1 is not a value of coordinate 'member'; "
                       r"the nearest are r1i1p1f1 \(index 0\), r2i1p1f1 \(index 1\)"):
        coordinate_index(members, "r3i1p1f1", key="sel.member", dim="member")
    twice = xr.DataArray(np.array([1.0, 2.0, 1.0]), dims="k", name="k")
    with pytest.raises(NcreelError, match=r"1 is at 2 indices of coordinate 'k' \(0, 2\)"):
        coordinate_index(twice, 1, key="sel.k", dim="k")


def test_mb_is_millibar_in_a_coordinate_and_in_a_value():
    # Older reanalyses write pressure levels in "mb"; pint alone reads it as millibarn.
    lev = xr.DataArray(np.array([1000.0, 850.0, 500.0]), dims="lev", name="lev",
                       attrs={"units": "mb"})
    for value in (850, "850 hPa", "85000 Pa", "850 mb", "850 millibar"):
        assert coordinate_index(lev, value, key="sel.lev", dim="lev") == 1, value
    plev = xr.DataArray(np.array([100000.0, 85000.0]), dims="plev", name="plev",
                        attrs={"units": "Pa"})
    assert coordinate_index(plev, "850 mb", key="sel.plev", dim="plev") == 1
    from ncreel.input.units import same_units

    assert same_units("mb", "mbar") and same_units("mb", "hPa") is False


def forecasts(path):
    """Two initialisations (6-hourly lead times each): dims (init, time, y, x), both dated."""
    ds = xr.Dataset(
        {"tas": (("init", "time", "y", "x"), np.arange(48.0).reshape(2, 6, 2, 2))},
        coords={"init": ("init", [0.0, 31.0], {"units": "days since 2000-01-01",
                                                 "calendar": "noleap"}),
                "time": ("time", np.arange(6) * 0.25,
                         {"units": "days since 2000-01-01", "axis": "T"})})
    ds.to_netcdf(path)
    return str(path)


def test_a_date_on_a_dated_dimension_other_than_the_frames(tmp_path):
    """sel: {init: "2000-02-01"} on a forecast's initialisation: the date, as precise as
    written, in the coordinate's own calendar; the frames' axis stays time_range's."""
    path = forecasts(tmp_path / "fc.nc")
    for value in ("2000-02-01", "2000-02", "2000-02-01T00:00", "2000-02-01 00:00:00"):
        assert resolve_sel(path, "tas", {"init": value}, {}, time_dim="time") == {"init": 1}
    assert resolve_sel(path, "tas", {"init": "2000-01"}, {}, time_dim="time") == {"init": 0}
    with pytest.raises(NcreelError) as err:
        resolve_sel(path, "tas", {"init": "2000-03-01"}, {}, time_dim="time")
    assert str(err.value) == ("config key 'sel.init': 2000-03-01 is not a date of 'init'; "
                              "it has 2000-01-01 (index 0), 2000-02-01 (index 1)")
    with pytest.raises(NcreelError, match="'sel.init': 2000 matches 2 dates of 'init' "
                       r"\(2000-01-01 \(index 0\), 2000-02-01 \(index 1\)\): give a more "
                       "precise date"):
        resolve_sel(path, "tas", {"init": 2000}, {}, time_dim="time")
    # The frames' own axis is time_range's, whichever the config says it is.
    with pytest.raises(NcreelError, match="'sel.time': 'time' is the time axis"):
        resolve_sel(path, "tas", {"time": "2000-01-01"}, {}, time_dim="time")
    assert resolve_sel(path, "tas", {"time": "2000-01-01 18:00"}, {}, time_dim="init") == {
        "time": 3}
    # Two dated dimensions and no time_dim: neither is assumed to be the frames'.
    assert resolve_sel(path, "tas", {"init": "2000-02"}, {}) == {"init": 1}
    with pytest.raises(NcreelError, match="'panels\\[1\\].sel.init' and "
                       "'panels\\[1\\].select.init' both choose"):
        resolve_sel(path, "tas", {"init": "2000-02"}, {"init": 0}, key="panels[1].sel")
