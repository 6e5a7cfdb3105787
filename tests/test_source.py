"""Reading real NetCDF files: time-dimension detection, decoding fallbacks, bad input."""

from pathlib import Path

import numpy as np
import pytest
import xarray as xr
from conftest import derive_nc
from ncreel.errors import NcreelError
from ncreel.source import detect_time_dim, open_selection, open_series


def test_sample_header(sample_nc):
    with open_series(str(sample_nc), "air_temperature") as s:
        assert s.time_dim == "time"
        assert s.shape == (240, 37, 49)
        assert (s.y_dim, s.x_dim) == ("latitude", "longitude")
        assert s.dtype == np.float32
        t = s.time_axis()
        assert t.decoded and t.calendar == "360_day"
        assert t.labels[0] == "1860-06-01T00:00:00"
        assert t.postgres_type == "text"  # 360-day dates are not PostgreSQL timestamps
        lat, lon = s.cell_coordinates()
        assert lat.shape == lon.shape == (37, 49)
        assert lat[0, 0] == 15.0 and lon[0, 0] == 225.0


def test_read_slice_equals_xarray(sample_nc):
    ref = xr.open_dataset(sample_nc)["air_temperature"].isel(time=slice(100, 130)).values
    with open_series(str(sample_nc), "air_temperature") as s:
        np.testing.assert_array_equal(s.read(100, 130), ref)
        blocks = list(s.iter_blocks(100, 130, max_bytes=37 * 49 * 8 * 7))
    assert [t0 for t0, _ in blocks] == [100, 107, 114, 121, 128]
    np.testing.assert_array_equal(np.concatenate([b for _, b in blocks]), ref)


def test_missing_values_become_nan(eofs_data):
    with open_series(str(eofs_data / "sst_ndjfm_anom.nc"), "sst") as s:
        block = s.read(0, 1)
        assert s.time_axis().postgres_type == "timestamp without time zone"
    assert np.isnan(block).any() and np.isfinite(block).any()
    assert np.nanmax(np.abs(block)) < 100  # the 1e20 missing_value never leaks through


def test_select_extra_dimension(eofs_data):
    path = str(eofs_data / "hgt_djf.nc")
    with pytest.raises(NcreelError, match=r"not 2-D per time step: extra dims pressure.*select"):
        open_series(path, "z")
    with open_series(path, "z", select={"pressure": 0}) as s:
        assert s.shape == (65, 29, 49)
        assert s.time_axis().labels[0].startswith("1948-") or s.time_axis().decoded


def test_renamed_time_dim_with_months_since(tmp_path, sample_nc):
    # 'months since' is not decodable for a real-world calendar: fall back to raw values.
    path = derive_nc(sample_nc, tmp_path / "m.nc", variable="air_temperature",
                     rename={"time": "month"},
                     time_attrs={"units": "months since 1860-01-01", "calendar": "standard"})
    with open_series(str(path), "air_temperature") as s:
        assert s.time_dim == "month"
        t = s.time_axis()
    assert not t.decoded and "months since" in t.note
    assert t.labels == [None] * 240
    assert t.postgres_type == "text"
    assert np.isfinite(t.values).all()


def test_time_dim_without_attributes_is_found_by_its_name(tmp_path, sample_nc):
    path = derive_nc(sample_nc, tmp_path / "a.nc", variable="air_temperature",
                     rename={"time": "Time"}, drop_attrs=True)
    with open_series(str(path), "air_temperature") as s:
        assert s.time_dim == "Time"
        assert not s.time_axis().decoded


def test_year_zero_360_day_decodes(tmp_path, sample_nc):
    path = derive_nc(sample_nc, tmp_path / "y0.nc", variable="air_temperature",
                     time_attrs={"units": "days since 0000-01-01", "calendar": "360_day"})
    with open_series(str(path), "air_temperature") as s:
        t = s.time_axis()
    assert t.decoded, t.note


def test_ambiguous_time_lists_dims(tmp_path):
    ds = xr.Dataset({"v": (("t1", "t2", "y", "x"), np.zeros((2, 3, 4, 5)))},
                    coords={"t1": ("t1", [0, 1], {"units": "days since 2000-01-01"}),
                            "t2": ("t2", [0, 1, 2], {"axis": "T"})})
    ds.to_netcdf(tmp_path / "amb.nc")
    with pytest.raises(NcreelError, match=r"ambiguous time dimension.*t1, t2"):
        open_series(str(tmp_path / "amb.nc"), "v")
    with xr.open_dataset(tmp_path / "amb.nc", decode_times=False) as opened:
        assert detect_time_dim(opened, "v", "t2") == "t2"


def test_no_time_dimension(tmp_path):
    xr.Dataset({"v": (("y", "x"), np.zeros((3, 4)))}).to_netcdf(tmp_path / "nt.nc")
    with pytest.raises(NcreelError, match=r"'v' has no time axis: none of its dims \(y, x\)"):
        open_series(str(tmp_path / "nt.nc"), "v")


def test_one_dimensional_variable(tmp_path):
    xr.Dataset({"soi": (("time",), np.zeros(5))},
               coords={"time": ("time", np.arange(5.0), {"units": "days since 2000-01-01"})}
               ).to_netcdf(tmp_path / "soi.nc")
    with pytest.raises(NcreelError, match=r"'soi' has dims \(time\); need time plus two"):
        open_series(str(tmp_path / "soi.nc"), "soi")


def test_empty_time_axis(tmp_path):
    ds = xr.Dataset({"v": (("time", "lat", "lon"), np.zeros((0, 2, 3)))},
                    coords={"time": ("time", np.zeros(0), {"units": "days since 2000-01-01"})})
    ds.to_netcdf(tmp_path / "empty.nc")
    with pytest.raises(NcreelError, match=r"time dimension 'time' of 'v' is empty"):
        open_series(str(tmp_path / "empty.nc"), "v")


def test_unknown_variable_lists_variables(sample_nc):
    with pytest.raises(NcreelError, match=r"no variable 'tas' \(variables: .*air_temperature"):
        open_series(str(sample_nc), "tas")


def test_missing_file_and_empty_glob(tmp_path):
    with pytest.raises(NcreelError, match=r"input '.*nope.nc': file not found"):
        open_series(str(tmp_path / "nope.nc"), "v")
    with pytest.raises(NcreelError, match=r"no file matches this glob"):
        open_series(str(tmp_path / "*.nc"), "v")


def test_not_netcdf(tmp_path):
    (tmp_path / "bad.nc").write_text("hello")
    with pytest.raises(NcreelError, match=r"bad.nc': not a readable NetCDF file"):
        open_series(str(tmp_path / "bad.nc"), "v")


def test_not_netcdf_error_is_one_line(tmp_path):
    # xarray's "no IO backend" message spans lines; ncreel: error: ... must stay one line.
    for name, text in (("text.nc", "hello\n"), ("empty.nc", "")):
        (tmp_path / name).write_text(text)
        with pytest.raises(NcreelError) as info:
            open_series(str(tmp_path / name), "v")
        assert "\n" not in str(info.value)
        assert f"{name}': not a readable NetCDF file" in str(info.value)
    assert str(NcreelError("a\n  b")) == "a b"


def test_truncated_netcdf4_says_what_to_do(tmp_path, sample_nc):
    data = Path(sample_nc).read_bytes()
    (tmp_path / "cut.nc").write_bytes(data[: len(data) // 2])
    with pytest.raises(NcreelError, match=r"cut.nc': not a readable .* copy it again"):
        open_series(str(tmp_path / "cut.nc"), "air_temperature")


def test_directory_input_says_directory(tmp_path):
    with pytest.raises(NcreelError, match=r"is a directory: name its files"):
        open_series(str(tmp_path), "v")


def test_bad_select(sample_nc, eofs_data):
    with pytest.raises(NcreelError, match=r"'level' is not a dimension"):
        open_series(str(sample_nc), "air_temperature", select={"level": 0})
    with pytest.raises(NcreelError, match=r"pressure=3 must be an integer index in 0..0"):
        open_series(str(eofs_data / "hgt_djf.nc"), "z", select={"pressure": 3})


def test_glob_of_files_split_along_time(tmp_path, sample_nc):
    with xr.open_dataset(sample_nc, decode_times=False) as ds:
        ds = ds[["air_temperature"]].load()
    for i, start in enumerate(range(0, 240, 100)):
        ds.isel(time=slice(start, start + 100)).to_netcdf(tmp_path / f"part_{i}.nc")
    with open_series(str(tmp_path / "part_*.nc"), "air_temperature") as s, \
            open_series(str(sample_nc), "air_temperature") as whole:
        assert s.counts == (100, 100, 40)
        np.testing.assert_array_equal(s.read(90, 210), whole.read(90, 210))
        assert s.time_axis().labels == whole.time_axis().labels


def test_postgres_type_of_an_axis_without_labels():
    from ncreel.source import TimeAxis

    def axis(labels, calendar="standard"):
        return TimeAxis(np.zeros(len(labels)), labels, calendar, "days since 2000-01-01", True)

    assert axis([]).postgres_type == "timestamp without time zone"
    assert axis(["2000-01-16T00:00:00"]).postgres_type == "timestamp without time zone"
    assert axis(["1500-01-16T00:00:00", "2000-01-16T00:00:00"]).postgres_type == "text"
    assert axis([], "360_day").postgres_type == "text"


def test_cf_time_named_in_coordinates_beats_a_dimension_coordinate_without_units(tmp_path):
    # NEMO output: time_counter (the dimension) has no units and is 0 everywhere; the
    # variable's `coordinates` attribute names time_centered, a CF time that decodes.
    path = tmp_path / "nemo.nc"
    ds = xr.Dataset(
        {"tos": (("time_counter", "y", "x"), np.ones((3, 2, 4), np.float32),
                 {"coordinates": "time_centered nav_lat nav_lon"})},
        coords={"time_counter": ("time_counter", np.zeros(3)),
                "time_centered": ("time_counter", [15.5, 45.0, 74.5],
                                  {"units": "days since 2000-01-01", "calendar": "noleap"})})
    ds.to_netcdf(path)
    with open_series(str(path), "tos") as s:
        assert s.time_dim == "time_counter" and s.time_name == "time_centered"
        t = s.time_axis()
    assert t.decoded and t.labels[0].startswith("2000-01-16"), t.labels
    # Without it, the note says which key picks another time coordinate.
    xr.Dataset({"tos": (("time_counter", "y", "x"), np.ones((3, 2, 4), np.float32))},
               coords={"time_counter": ("time_counter", np.zeros(3))}).to_netcdf(
        tmp_path / "bare.nc")
    with open_series(str(tmp_path / "bare.nc"), "tos") as s:
        assert "set config key time=<name>" in s.time_axis().note


# The time axis is never guessed ---------------------------------------------------------

def _levels_file(path, *, time_dim=None, time_attrs=None):
    """``v(lev, lat, lon)`` with model levels (units 1), plus a time dimension if named."""
    dims = ("lev", "lat", "lon") if time_dim is None else (time_dim, "lev", "lat", "lon")
    shape = (2, 3, 4) if time_dim is None else (5, 2, 3, 4)
    coords = {"lev": ("lev", [1.0, 2.0], {"units": "1", "long_name": "model level"}),
              "lat": ("lat", [0.0, 1.0, 2.0], {"units": "degrees_north"}),
              "lon": ("lon", [0.0, 1.0, 2.0, 3.0], {"units": "degrees_east"})}
    if time_attrs is not None:
        coords[time_dim] = (time_dim, np.arange(5.0), time_attrs)
    xr.Dataset({"v": (dims, np.zeros(shape, np.float32))}, coords=coords).to_netcdf(path)
    return str(path)


def test_levels_are_not_taken_as_time(tmp_path):
    path = _levels_file(tmp_path / "lev.nc")
    with pytest.raises(NcreelError, match=r"'v' has no time axis: none of its dims "
                       r"\(lev, lat, lon\).*set time_dim=NAME \(e\.g\. time_dim=lev\)"):
        open_series(path, "v")
    # Chosen explicitly, the levels are the frames.
    with open_series(path, "v", time_dim="lev") as s:
        assert (s.time_dim, s.shape) == ("lev", (2, 3, 4))


@pytest.mark.parametrize("name", ["time", "Time", "t"])
def test_a_dimension_named_time_wins_over_a_level(tmp_path, name):
    # No CF attributes at all on the time dimension (no coordinate variable either).
    path = _levels_file(tmp_path / "tl.nc", time_dim=name)
    with pytest.raises(NcreelError, match=r"extra dims lev .*select"):
        open_series(path, "v")
    with open_series(path, "v", select={"lev": 1}) as s:
        assert (s.time_dim, s.shape) == (name, (5, 3, 4))


def test_bare_time_units_are_cf_evidence(tmp_path):
    # Units "hours" (no reference date) on a dimension not named time: still the time axis.
    path = _levels_file(tmp_path / "h.nc", time_dim="step", time_attrs={"units": "hours"})
    with open_series(path, "v", select={"lev": 0}) as s:
        assert s.time_dim == "step"
        t = s.time_axis()
    assert not t.decoded and (t.name, t.units) == ("step", "hours")
    np.testing.assert_array_equal(t.values, np.arange(5.0))


def test_a_forecast_lead_time_in_hours_is_not_the_time(tmp_path):
    # cfgrib-style forecast: time (reference time, "since") and step (lead time, hours).
    ds = xr.Dataset({"t2m": (("time", "step", "lat", "lon"), np.zeros((2, 3, 2, 2)))},
                    coords={"time": ("time", [0.0, 12.0], {"units": "hours since 2020-01-01"}),
                            "step": ("step", [0.0, 6.0, 12.0], {"units": "hours"}),
                            "lat": ("lat", [0.0, 1.0], {"units": "degrees_north"}),
                            "lon": ("lon", [0.0, 1.0], {"units": "degrees_east"})})
    ds.to_netcdf(tmp_path / "fc.nc")
    with pytest.raises(NcreelError, match=r"extra dims step .*select"):
        open_series(str(tmp_path / "fc.nc"), "t2m")
    with open_series(str(tmp_path / "fc.nc"), "t2m", select={"step": 0}) as s:
        assert s.time_dim == "time"


def test_two_dims_named_time_are_ambiguous(tmp_path):
    xr.Dataset({"v": (("time", "t", "y", "x"), np.zeros((2, 3, 4, 5)))}).to_netcdf(
        tmp_path / "two.nc")
    with pytest.raises(NcreelError, match=r"ambiguous time dimension, 2 dims named as time: "
                       r"time, t .*set time_dim=NAME"):
        open_series(str(tmp_path / "two.nc"), "v")


# Fill values in the time coordinate are missing steps -----------------------------------

@pytest.mark.parametrize("declared", [False, True])
def test_default_fill_value_time_is_a_missing_step(tmp_path, declared):
    import netCDF4

    path = tmp_path / "fill.nc"
    with netCDF4.Dataset(path, "w") as nc:
        nc.createDimension("time", None)
        nc.createDimension("lat", 2)
        nc.createDimension("lon", 3)
        kw = {"fill_value": netCDF4.default_fillvals["f8"]} if declared else {}
        t = nc.createVariable("time", "f8", ("time",), **kw)
        t.units, t.calendar = "days since 2000-01-01", "standard"
        if not declared:
            assert "_FillValue" not in t.ncattrs()
        nc.createVariable("lat", "f8", ("lat",)).units = "degrees_north"
        nc.createVariable("lon", "f8", ("lon",)).units = "degrees_east"
        nc["lat"][:], nc["lon"][:] = [0.0, 1.0], [0.0, 1.0, 2.0]
        nc.createVariable("tas", "f4", ("time", "lat", "lon"))[:] = np.ones((4, 2, 3))
        t[0], t[2], t[3] = 0.0, 2.0, 3.0  # step 1 never written: netCDF's default fill
    with netCDF4.Dataset(path) as nc:
        nc.set_auto_mask(False)
        assert nc["time"][1] == np.float64(9.969209968386869e36)
    with open_series(str(path), "tas") as s:
        t = s.time_axis()
    assert t.labels == ["2000-01-01T00:00:00", None, "2000-01-03T00:00:00",
                        "2000-01-04T00:00:00"]
    assert np.isnan(t.values[1]) and t.decoded
    assert "1 of 4 'time' values are missing" in t.note


def test_all_fill_value_time_is_undecoded_not_a_date(tmp_path):
    path = tmp_path / "allfill.nc"
    xr.Dataset({"tas": (("time", "lat", "lon"), np.ones((2, 2, 3), np.float32))},
               coords={"time": ("time", [9.969209968386869e36] * 2, {"units": "days since "
                                                                       "2000-01-01"}),
                       "lat": ("lat", [0.0, 1.0], {"units": "degrees_north"}),
                       "lon": ("lon", [0.0, 1.0, 2.0], {"units": "degrees_east"})}
               ).to_netcdf(path, encoding={"time": {"_FillValue": None}})
    with open_series(str(path), "tas") as s:
        t = s.time_axis()
    assert t.labels == [None, None] and not t.decoded
    assert np.isnan(t.values).all()


@pytest.mark.parametrize("name, variable, dim", [
    ("hybrid_height.nc", "air_potential_temperature", "model_level_number"),
    ("atlantic_profiles.nc", "theta", "depth"),
])
def test_real_files_without_time_stop_with_one_line(name, variable, dim):
    from ncreel.sample import sample_path

    with pytest.raises(NcreelError, match=rf"'{variable}' has no time axis: .*"
                       rf"set time_dim=NAME \(e\.g\. time_dim={dim}\)") as err:
        open_series(str(sample_path(name)), variable)
    assert "\n" not in str(err.value)


# Files whose times overlap ----------------------------------------------------------------

def _days_file(path, days, *, change=None):
    """``tas(time, lat, lon)`` on the given days since 2000-01-01; value 100*day + cell."""
    days = np.asarray(days, dtype=np.float64)
    values = (100.0 * days[:, None, None] + np.arange(6.0).reshape(1, 2, 3)).astype(np.float32)
    if change is not None:
        values[np.isin(days, change)] += 0.5  # a re-run that differs on these days
    values[:, 0, 0] = np.nan  # a masked cell: NaN equals NaN when comparing repeats
    xr.Dataset({"tas": (("time", "lat", "lon"), values, {"units": "K"})},
               coords={"time": ("time", days, {"units": "days since 2000-01-01",
                                               "calendar": "noleap"}),
                       "lat": ("lat", [0.0, 1.0], {"units": "degrees_north"}),
                       "lon": ("lon", [0.0, 1.0, 2.0], {"units": "degrees_east"})}
               ).to_netcdf(path, encoding={"tas": {"_FillValue": -1e30}})
    return str(path)


def _truth(days):
    days = np.asarray(days, dtype=np.float64)
    values = 100.0 * days[:, None, None] + np.arange(6.0).reshape(1, 2, 3)
    values[:, 0, 0] = np.nan
    return values


def test_overlapping_files_with_equal_data_keep_each_time_once(tmp_path):
    from ncreel.settings import SeriesSelection

    a = _days_file(tmp_path / "run_a.nc", range(0, 6))
    b = _days_file(tmp_path / "run_b.nc", range(3, 9))   # a restart: days 3-5 again
    with open_series(str(tmp_path / "run_*.nc"), "tas") as s:
        assert s.n_time == 9 and s.counts == (6, 3)
        assert (f"'{b}' repeats 3 times 2000-01-04T00:00:00 .. 2000-01-06T00:00:00 of "
                f"'{a}' with equal values of 'tas': kept once") in s.note
        t = s.time_axis()
        np.testing.assert_array_equal(s.read(0, 9), _truth(range(9)))
        np.testing.assert_array_equal(s.read(5, 7), _truth([5, 6]))
        spec = s.spec()
    assert t.labels == [f"2000-01-0{d + 1}T00:00:00" for d in range(9)]
    np.testing.assert_array_equal(t.values, np.arange(9.0))
    assert spec["steps"] == [[[0, 6]], [[3, 6]]]
    # Every job reopens the same steps from the spec, without comparing data again.
    with open_selection(SeriesSelection.from_params(spec)) as again:
        assert again.counts == (6, 3) and again.note == ""
        np.testing.assert_array_equal(again.read(2, 8), _truth(range(2, 8)))
        assert again.time_axis().labels == t.labels


def test_overlapping_files_with_different_data_stop_naming_both(tmp_path):
    a = _days_file(tmp_path / "orig.nc", range(0, 31))
    b = _days_file(tmp_path / "rerun.nc", range(28, 40), change=[29, 30])
    with pytest.raises(NcreelError) as err:
        open_series([a, b], "tas")
    msg = str(err.value)
    assert (f"input files '{a}' and '{b}' both hold 'tas' at 2 times 2000-01-30T00:00:00 .. "
            "2000-01-31T00:00:00 with different values") in msg, msg


def test_a_file_repeated_whole_adds_nothing(tmp_path):
    a = _days_file(tmp_path / "m.nc", range(0, 4))
    b = _days_file(tmp_path / "m_copy.nc", range(0, 4))
    with open_series([b, a], "tas") as s:
        assert s.n_time == 4 and s.counts == (4, 0)
        assert f"'{s.paths[1]}' adds no time step" in s.note
        np.testing.assert_array_equal(s.read(0, 4), _truth(range(4)))
        assert len(s.time_axis().labels) == 4


def test_repeats_inside_a_later_file_read_around_the_gap(tmp_path):
    # The later file's kept steps are two runs (days 1-4 and 6); reads cross the gap.
    a = _days_file(tmp_path / "a.nc", [0, 5])
    b = _days_file(tmp_path / "b.nc", range(1, 7))
    with open_series([a, b], "tas") as s:
        assert s.steps == (((0, 2),), ((0, 4), (5, 6)))
        assert f"times of '{b}' (2000-01-02T00:00:00 .. 2000-01-07T00:00:00) fall inside " \
            "those of" in s.note
        np.testing.assert_array_equal(s.read(0, 7), _truth([0, 5, 1, 2, 3, 4, 6]))
        np.testing.assert_array_equal(s.read(4, 7), _truth([3, 4, 6]))


def test_a_time_repeated_inside_one_file(tmp_path):
    import netCDF4

    # ncrcat of two overlapping files: days 0-3 then 2-5 in one file.
    days = [0, 1, 2, 3, 2, 3, 4, 5]
    path = _days_file(tmp_path / "cat.nc", days)
    with open_series(path, "tas") as s:
        assert s.steps == (((0, 4), (6, 8)),)
        assert f"'{path}' repeats 2 times 2000-01-03T00:00:00 .. 2000-01-04T00:00:00 of " \
            "itself with equal values of 'tas': kept once, from itself" in s.note
        np.testing.assert_array_equal(s.read(0, 6), _truth(range(6)))
    bad = _days_file(tmp_path / "bad.nc", days)
    with netCDF4.Dataset(bad, "a") as nc:
        nc["tas"][5] = nc["tas"][5] + 1.0  # the second day 3 differs from the first
    with pytest.raises(NcreelError, match=rf"input '{bad}' holds 'tas' twice at 1 time "
                       r"2000-01-04T00:00:00 with different values"):
        open_series(bad, "tas")


def test_input_paths_say_the_real_reason(tmp_path):
    import os

    from ncreel.errors import NcreelError
    from ncreel.source import resolve_paths

    fifo = tmp_path / "pipe.nc"
    os.mkfifo(fifo)
    with pytest.raises(NcreelError, match=r"is a FIFO \(named pipe\), not a file"):
        resolve_paths(str(fifo))
    with pytest.raises(NcreelError, match="is a device, not a file"):
        resolve_paths("/dev/zero")
    loop = tmp_path / "loop.nc"
    loop.symlink_to(loop)
    with pytest.raises(NcreelError, match="a loop of symbolic links"):
        resolve_paths(str(loop))
    dangling = tmp_path / "gone.nc"
    dangling.symlink_to(tmp_path / "nowhere.nc")
    with pytest.raises(NcreelError, match="a symbolic link to .*nowhere.nc.*which does not "
                                          "exist"):
        resolve_paths(str(dangling))
    with pytest.raises(NcreelError, match="file not found"):
        resolve_paths(str(tmp_path / "missing.nc"))
    # A name with glob characters that exists is that file, not a glob.
    bracket = tmp_path / "run[1].nc"
    bracket.write_bytes(b"")
    assert resolve_paths(str(bracket)) == [str(bracket)]
    (tmp_path / "run2.nc").write_bytes(b"")
    assert resolve_paths(str(tmp_path / "run[2-3].nc")) == [str(tmp_path / "run2.nc")]
    with pytest.raises(NcreelError, match="no file matches this glob"):
        resolve_paths(str(tmp_path / "run[7-9].nc"))


def test_unreadable_input_says_permission_denied(tmp_path):
    import os

    from ncreel.errors import NcreelError
    from ncreel.source import resolve_paths

    if os.geteuid() == 0:
        pytest.skip("root reads every file")
    f = tmp_path / "secret.nc"
    f.write_bytes(b"CDF")
    f.chmod(0)
    with pytest.raises(NcreelError, match=r"cannot be read \(permission denied\)"):
        resolve_paths(str(f))
