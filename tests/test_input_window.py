"""Config time_range and time_every: the steps a run shows (ncreel.input.timeaxis.time_window)
and a series that reads only them (ncreel.input.source, Series.window), on real files."""

from __future__ import annotations

import numpy as np
import pytest
import xarray as xr
from ncreel.core.errors import NcreelError
from ncreel.input.source import open_series
from ncreel.input.timeaxis import TimeAxis, time_bound, time_window


def _axis(labels, calendar="standard"):
    return TimeAxis(values=np.arange(len(labels), dtype=float), labels=list(labels),
                    calendar=calendar, units="days since 2000-01-01", decoded=True)


def test_bounds_are_periods_as_precise_as_written():
    assert time_bound(1990) == (1990,)
    assert time_bound("1990-06") == (1990, 6)
    assert time_bound("1990-02-30") == (1990, 2, 30)  # a day of a 360-day year
    assert time_bound("1990-06-01 12:30") == (1990, 6, 1, 12, 30)
    assert time_bound("1990-06-01T12") == (1990, 6, 1, 12)
    for bad in ("1990-13", "1990/06", "June 1990", "1990-06-01 24:00", ""):
        with pytest.raises(NcreelError, match="config key 'time_range': .* is not a date"):
            time_bound(bad)


def test_the_sample_decade_inclusive_in_its_360_day_calendar(sample_nc):
    """HadCM3 annual steps dated 1 June (360_day): [1990, 1999] is ten steps, both ends
    included; a month bound takes the whole month, a day bound the whole day."""
    with open_series(str(sample_nc), "air_temperature") as s:
        axis = s.time_axis()
    assert time_window(axis, [1990, 1999]) == (130, 140, 1)
    assert time_window(axis, ["1990-06", "1999-06"]) == (130, 140, 1)
    assert time_window(axis, ["1990-06-02", "1999-06-01"]) == (131, 140, 1)
    assert time_window(axis, ["1990-07", "1999"]) == (131, 140, 1)
    assert time_window(axis, [1990, 1999], 4) == (130, 140, 4)
    assert time_window(axis, None, 1) is None  # every step: as without the settings
    assert time_window(axis, [1800, 2200]) is None
    assert time_window(axis, None, 12) == (0, 240, 12)


def test_hours_of_a_day_and_a_stride(tmp_path):
    labels = [f"2000-01-0{1 + h // 24}T{h % 24:02d}:00:00" for h in range(48)]
    axis = _axis(labels)
    assert time_window(axis, ["2000-01-01 06:00", "2000-01-01"]) == (6, 24, 1)
    assert time_window(axis, ["2000-01-01 06", "2000-01-02 05"], 6) == (6, 30, 6)


def test_ranges_that_cannot_be_shown_stop_with_one_line(sample_nc):
    with open_series(str(sample_nc), "air_temperature") as s:
        axis = s.time_axis()
    with pytest.raises(NcreelError, match=r"\[2000, 1990\] starts after it ends"):
        time_window(axis, [2000, 1990])
    with pytest.raises(NcreelError, match=r"\[2200, 2300\] holds no step of 'tas', whose "
                       r"steps run from 1860-06-01T00:00:00 to 2099-06-01T00:00:00 "
                       r"\(calendar 360_day\)"):
        time_window(axis, [2200, 2300], variable="tas")
    raw = TimeAxis(values=np.arange(3.0), labels=[None] * 3, calendar="standard", units="",
                   decoded=False, note="no CF time units")
    with pytest.raises(NcreelError, match="time of 'v' is not decoded .* use time_every alone"):
        time_window(raw, [1990, 1991], variable="v")
    assert time_window(raw, None, 2) == (0, 3, 2)


def test_times_out_of_order_inside_the_range_are_named():
    axis = _axis(["2000-01-01", "2000-01-02", "2001-05-01", "2000-01-03", "2000-01-04"])
    with pytest.raises(NcreelError, match=r"step 2 of 'v' \(2001-05-01\) lies outside the "
                       "range but between steps inside it"):
        time_window(axis, ["2000-01", "2000-01"], variable="v")


def _files(tmp_path, n_files=3, per_file=5):
    """Files of one series split along time, days 0.. (an own value per step)."""
    paths = []
    for k in range(n_files):
        t = np.arange(k * per_file, (k + 1) * per_file, dtype=float)
        data = (t[:, None, None] * 100 + np.arange(6).reshape(1, 2, 3)).astype("f4")
        ds = xr.Dataset({"v": (("time", "lat", "lon"), data)},
                        coords={"time": ("time", t, {"units": "days since 2000-01-01",
                                                     "calendar": "noleap"}),
                                "lat": ("lat", [10.0, 20.0], {"units": "degrees_north"}),
                                "lon": ("lon", [0.0, 10.0, 20.0], {"units": "degrees_east"})})
        paths.append(str(tmp_path / f"v_{k}.nc"))
        ds.to_netcdf(paths[-1])
    return paths


@pytest.mark.parametrize("window", [(0, 15, 1), (2, 13, 3), (4, 15, 5), (6, 7, 1),
                                    (1, 14, 4), (0, 15, 15)])
def test_a_window_reads_exactly_its_steps_across_files(tmp_path, window):
    paths = _files(tmp_path)
    with open_series(paths, "v") as whole:
        everything = whole.read(0, whole.n_time)
        labels = whole.time_axis().labels
    want = np.arange(*window)
    with open_series(paths, "v", window=window) as s:
        assert s.n_time == want.size and s.n_input == 15
        np.testing.assert_array_equal(s.read(0, s.n_time), everything[want])
        # any sub-range, and the blocks the jobs read
        if s.n_time > 2:
            np.testing.assert_array_equal(s.read(1, s.n_time - 1), everything[want[1:-1]])
        blocks = [b for _, b in s.iter_blocks(0, s.n_time, max_bytes=6 * 8 * 2)]
        np.testing.assert_array_equal(np.concatenate(blocks), everything[want])
        assert s.time_axis().labels == [labels[i] for i in want]
        np.testing.assert_array_equal(s.input_index(np.arange(s.n_time)), want)
        assert s.spec()["window"] == list(window)


def test_a_window_keeps_the_steps_of_repeated_times_dropped(tmp_path):
    """A re-run month beside the original: its repeated steps are dropped first; the window
    counts the whole series after that (the same indices whichever files hold a step)."""
    paths = _files(tmp_path, n_files=2, per_file=6)
    with xr.open_dataset(paths[1]) as ds:  # days 6..11, with days 4 and 5 again
        again = xr.open_dataset(paths[0]).isel(time=slice(4, 6)).load()
        xr.concat([again, ds.load()], dim="time").to_netcdf(tmp_path / "v_1b.nc")
    paths = [paths[0], str(tmp_path / "v_1b.nc")]
    with open_series(paths, "v") as whole:
        assert whole.n_time == 12
        everything = whole.read(0, 12)
        steps = whole.spec()["steps"]
    with open_series(paths, "v", steps=steps, window=(3, 12, 2)) as s:
        np.testing.assert_array_equal(s.read(0, s.n_time), everything[3:12:2])


def test_a_window_the_files_no_longer_hold_stops_a_job(tmp_path):
    paths = _files(tmp_path, n_files=1)
    with pytest.raises(NcreelError, match="has 5 time steps, the run's plan shows steps "
                       "3..9 .* start a new run"):
        open_series(paths, "v", window=(3, 10, 2))


@pytest.mark.parametrize(("calendar", "day"), [("noleap", "2000-02-29"),
                                               ("standard", "2000-02-30"),
                                               ("proleptic_gregorian", "1999-02-29"),
                                               ("360_day", "2000-02-31")])
def test_a_day_the_calendar_does_not_have_is_one_line(calendar, day):
    axis = _axis(["2000-01-01T00:00:00", "2000-03-01T00:00:00"], calendar)
    with pytest.raises(NcreelError, match=f"'{day}' is not a day of the '{calendar}' "
                                          "calendar of 'tas'"):
        time_window(axis, [day, "2000-03"], variable="tas")
    # the days it has are dates
    good = {"noleap": "2000-02-28", "360_day": "2000-02-30"}.get(calendar, "2000-02-28")
    assert time_window(axis, [good, "2000-03"], variable="tas") == (1, 2, 1)


@pytest.mark.parametrize("every", [0, -1, True, 2.5, "3"])
def test_time_every_must_be_a_whole_number_of_at_least_one(every):
    axis = _axis(["2000-01-01T00:00:00", "2000-01-02T00:00:00"])
    with pytest.raises(NcreelError, match="config key 'time_every'"):
        time_window(axis, None, every, variable="tas")


def test_a_stride_past_the_last_step_shows_the_first_whatever_its_size():
    axis = _axis([f"2000-01-0{d}T00:00:00" for d in range(1, 6)])
    for every in (5, 6, 2**63, 10**20):
        assert time_window(axis, None, every) == (0, 5, 5)
    assert time_window(axis, ["2000-01-02", "2000-01-04"], 10**20) == (1, 4, 3)
