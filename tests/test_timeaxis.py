"""Time axis detection and decoding (ncreel.input.timeaxis), through real files and directly."""


import numpy as np
import pytest
import xarray as xr
from conftest import derive_nc, needs_programs
from ncreel.core.errors import NcreelError
from ncreel.input.source import open_series
from ncreel.input.timeaxis import detect_time_dim


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


def test_postgres_type_of_an_axis_without_labels():
    from ncreel.input.timeaxis import TimeAxis

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


@pytest.mark.parametrize("attrs", [None, {"units": "days since 2000-01-01"}])
def test_select_on_the_time_axis_says_to_choose_steps(tmp_path, attrs):
    """select: {time: 3} fixes the frames' axis: one line saying how steps are chosen,
    not that the variable has no time axis (named time, or with CF time units)."""
    path = _levels_file(tmp_path / "sel.nc", time_dim="time", time_attrs=attrs)
    with pytest.raises(NcreelError, match=r"config key 'select\.time': 'time' is the time "
                       r"axis, whose steps are the frames: choose steps with time_range"):
        open_series(path, "v", select={"time": 3, "lev": 0})


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


# One ISO 8601 parser for the package: time strings in files and dates in the config ---------

ISO_CASES = [  # text, calendar, (year, month, day, hour, minute, second) or None
    ("2001-02-03", "standard", (2001, 2, 3, 0, 0, 0)),
    ("2001-2-3", "standard", (2001, 2, 3, 0, 0, 0)),
    (" 2001-02-03 ", "standard", (2001, 2, 3, 0, 0, 0)),
    ("2001-02-03T04:05", "standard", (2001, 2, 3, 4, 5, 0)),
    ("2001-02-03 04:05:06", "standard", (2001, 2, 3, 4, 5, 6)),
    ("2001-02-03_04:05:06", "standard", (2001, 2, 3, 4, 5, 6)),  # WRF's Times
    ("2001-02-03T04:05:06.75", "standard", (2001, 2, 3, 4, 5, 6)),  # fraction dropped
    ("2001-02-03T04:05:06Z", "standard", (2001, 2, 3, 4, 5, 6)),
    ("2001-02-03T04:05:06+00:00", "standard", (2001, 2, 3, 4, 5, 6)),
    ("2001-02-03 04:05:06 UTC", "standard", (2001, 2, 3, 4, 5, 6)),
    ("10000-01-01T00:00:00", "proleptic_gregorian", (10000, 1, 1, 0, 0, 0)),  # cftime labels
    ("0000-06-01", "360_day", (0, 6, 1, 0, 0, 0)),
    ("2001-02-30", "360_day", (2001, 2, 30, 0, 0, 0)),
    ("2000-02-29", "standard", (2000, 2, 29, 0, 0, 0)),
    ("2001-02-29", "noleap", None),  # the form, not a date of the calendar
    ("2001-02-30", "standard", None),
    ("2001-13-01", "standard", None),
    ("2001-02-03T04", "standard", None),  # an hour without minutes
    ("2001-02-03T04:05:06+01:00", "standard", None),  # not UTC: never silently shifted
    ("2001/02/03", "standard", None),
    ("20010203", "standard", None),
    ("", "standard", None),
    ("next tuesday", "standard", None),
]


@pytest.mark.parametrize("text, calendar, want", ISO_CASES)
def test_iso_dates_of_files_and_config_follow_one_rule(text, calendar, want):
    from ncreel.cells.soil import parse_date
    from ncreel.input.timeaxis import parse_iso_date

    got = parse_iso_date(text, calendar)
    if want is None:
        assert got is None
        with pytest.raises(NcreelError, match=r"config key 'cells\.params\.applications': "
                                              r".*(is not YYYY-MM-DD|not a date of calendar)"):
            parse_date(text, calendar)
        return
    fields = (got.year, got.month, got.day, got.hour, got.minute, got.second)
    assert fields == want and got.calendar == calendar
    assert parse_date(text, calendar) == got


def test_config_dates_name_the_form_and_the_calendar():
    from ncreel.cells.soil import parse_date

    with pytest.raises(NcreelError, match=r"config key 'time': date '2001/02/03' is not "
                                          r"YYYY-MM-DD\[THH:MM\[:SS\]\]"):
        parse_date("2001/02/03", "standard", "time")
    with pytest.raises(NcreelError, match=r"'2001-02-29' is not a date of calendar 'noleap'"):
        parse_date("2001-02-29", "noleap")


def test_time_strings_in_a_file_decode_by_the_same_rule(tmp_path):
    texts = ["2001-01-01_00:00:00", "2001-01-02T00:00:00Z", "2001-01-03 00:00", "2001/01/04"]
    nc = tmp_path / "strings.nc"
    xr.Dataset({"v": (("time", "y", "x"), np.zeros((4, 2, 3))),
                "Times": (("time",), np.array(texts, dtype="S19"))}).to_netcdf(nc)
    with open_series(str(nc), "v", time="Times") as s:
        t = s.time_axis()
    assert t.labels[:3] == ["2001-01-01T00:00:00", "2001-01-02T00:00:00",
                            "2001-01-03T00:00:00"]
    assert t.labels[3] is None and "1 of 4 'Times' strings are not ISO 8601 dates" in t.note


@needs_programs("cdo")
def test_cdo_absolute_time_axis_of_icon_output_decodes_to_its_dates(tmp_path):
    # ICON output on its triangles, its time axis rewritten by CDO itself (`cdo -a`: the
    # form ICON writes, `day as %Y%m%d.%f`, 6-hourly): the dates, hours included, are those
    # xarray decodes from the original relative axis, and the values are the file's.
    import subprocess

    from meshes import icon_triangles, write_icon

    lon, lat, lon_b, lat_b = icon_triangles(120)
    write_icon(tmp_path / "rel.nc", lon, lat, lon_b, lat_b, nt=6)
    subprocess.run(["cdo", "-s", "-a", "copy", str(tmp_path / "rel.nc"),
                    str(tmp_path / "abs.nc")], check=True, capture_output=True)
    with xr.open_dataset(tmp_path / "abs.nc", decode_times=False) as ds:
        assert ds["time"].attrs["units"] == "day as %Y%m%d.%f"
        assert ds["time"].values[1] == 19790101.25
        want_values = ds["tas"].values
    with xr.open_dataset(tmp_path / "rel.nc",
                         decode_times=xr.coders.CFDatetimeCoder(use_cftime=True)) as ds:
        want = [d.isoformat() for d in ds["time"].values]
    with open_series(str(tmp_path / "abs.nc"), "tas") as s:
        t = s.time_axis()
        got = s.read(0, s.n_time)
    assert t.decoded and t.note == "" and t.calendar == "proleptic_gregorian"
    assert t.labels == want and t.labels[1] == "1979-01-01T06:00:00"
    assert t.postgres_type == "timestamp without time zone"
    np.testing.assert_array_equal(got[:, 0, :], want_values)
    from ncreel.render.timelabels import series_labels

    with open_series(str(tmp_path / "abs.nc"), "tas") as s:
        assert series_labels(s)[:2] == ["1979-01-01 00:00", "1979-01-01 06:00"]


@pytest.mark.parametrize("units, calendar, values, want", [
    ("day as %Y%m%d.%f", "proleptic_gregorian", [20981118.5, 20981119.0416666667],
     ["2098-11-18T12:00:00", "2098-11-19T01:00:00"]),
    ("month as %Y%m.%f", "360_day", [209802.0, 209802.5],  # half of a 30-day February
     ["2098-02-01T00:00:00", "2098-02-16T00:00:00"]),
    ("month as %Y%m.%f", "noleap", [209802.5], ["2098-02-15T00:00:00"]),
    ("year as %Y.%f", "360_day", [2000.0, 2000.5], ["2000-01-01T00:00:00",
                                                    "2000-07-01T00:00:00"]),
    ("day as %Y%m%d.%f", "noleap", [20000229.0, 20000301.0], [None, "2000-03-01T00:00:00"]),
])
def test_absolute_time_axes_keep_the_fraction_in_the_calendar(tmp_path, units, calendar,
                                                                values, want):
    path = tmp_path / "abs.nc"
    xr.Dataset({"v": (("time", "y", "x"), np.arange(len(values) * 6.0).reshape(-1, 2, 3))},
               coords={"time": ("time", values, {"units": units, "calendar": calendar,
                                                 "standard_name": "time"})}).to_netcdf(path)
    with open_series(str(path), "v") as s:
        t = s.time_axis()
    assert t.labels == want
    assert t.decoded
    if None in want:
        assert t.note == (f"{path}: 1 of 2 'time' values are not dates of the {calendar} "
                          f"calendar in units '{units}'")
    else:
        assert t.note == ""


def test_absolute_time_axis_is_time_evidence_without_a_time_name(tmp_path):
    path = tmp_path / "abs.nc"
    xr.Dataset({"v": (("step", "lev", "y", "x"), np.zeros((2, 3, 2, 2)))},
               coords={"step": ("step", [20000101.0, 20000102.0],
                                {"units": "day as %Y%m%d.%f"}),
                       "lev": ("lev", [1.0, 2.0, 3.0])}).to_netcdf(path)
    with open_series(str(path), "v", select={"lev": 0}) as s:
        assert s.time_dim == "step"
        assert s.time_axis().labels == ["2000-01-01T00:00:00", "2000-01-02T00:00:00"]
