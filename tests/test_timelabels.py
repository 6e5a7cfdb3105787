"""Frame time labels: dates as precise as the step, in the file's calendar; raw values else."""

from __future__ import annotations

import shutil
from datetime import timedelta
from pathlib import Path

import cftime
import numpy as np
import pytest
import xarray as xr
from ncreel.input.source import open_series
from ncreel.render.segment import time_labels
from ncreel.render.timelabels import (
    date_resolution,
    format_values,
    frame_labels,
    parse_label,
    step_seconds,
)

SAMPLE = Path(__import__("iris_sample_data").__file__).parent / "sample_data"


def _labels(dates, calendar="standard"):
    """Frame labels of cftime dates as the time axis stores them (ISO labels)."""
    iso = [d.isoformat() for d in dates]
    return frame_labels(iso, np.arange(len(iso), dtype=float), calendar=calendar,
                        units="days since 1850-01-01", name="time", time_dim="time")


def _write(path, values, units, calendar=None, name="time", dtype="f8"):
    attrs = {"units": units, "axis": "T"}
    if calendar is not None:
        attrs["calendar"] = calendar
    n = len(values)
    xr.Dataset({"tas": ((name, "lat", "lon"), np.zeros((n, 2, 3), "f4"), {"units": "K"})},
               coords={name: (name, np.asarray(values, dtype), attrs),
                       "lat": ("lat", [10.0, 20.0], {"units": "degrees_north"}),
                       "lon": ("lon", [0.0, 5.0, 10.0], {"units": "degrees_east"})}
               ).to_netcdf(path)
    return str(path)


def test_annual_means_in_a_360_day_calendar_read_as_years(tmp_path):
    # The demo: HadCM3 annual means, 240 steps dated mid-year (June 1st) of a 360-day year.
    path = shutil.copy(SAMPLE / "A1B_north_america.nc", tmp_path / "a1b.nc")
    with open_series(str(path), "air_temperature") as s:
        axis = s.time_axis()
        assert axis.calendar == "360_day" and axis.labels[0] == "1860-06-01T00:00:00"
        labels = time_labels(s)
        assert axis.labels[0] == "1860-06-01T00:00:00"  # the table keeps the full date
    assert labels[:3] == ["1860", "1861", "1862"] and labels[-1] == "2099"
    assert len(labels) == 240


@pytest.mark.parametrize("calendar", ["360_day", "noleap", "standard", "all_leap"])
def test_monthly_means_read_as_months_in_any_calendar(calendar):
    # Mid-month dates: steps of 28 to 31 days (30 in a 360-day year).
    dates = [cftime.datetime(1999 + (m + 10) // 12, (m + 10) % 12 + 1, 15, 12,
                             calendar=calendar) for m in range(15)]
    labels = _labels(dates, calendar)
    assert labels[:3] == ["1999-11", "1999-12", "2000-01"]
    assert labels[-1] == "2001-01"


def test_daily_noleap_and_360_day_calendars_keep_their_own_dates():
    noleap = [cftime.datetime(2000, 2, 27, calendar="noleap") + timedelta(days=i)
              for i in range(3)]
    assert _labels(noleap, "noleap") == ["2000-02-27", "2000-02-28", "2000-03-01"]
    d360 = [cftime.datetime(2000, 2, 29, 12, calendar="360_day") + timedelta(days=i)
            for i in range(3)]
    assert _labels(d360, "360_day") == ["2000-02-29", "2000-02-30", "2000-03-01"]


def test_sub_daily_steps_read_to_the_minute_or_second():
    six_hourly = [cftime.datetime(1980, 6, 1, calendar="standard")
                  + timedelta(hours=6 * i) for i in range(5)]
    assert _labels(six_hourly) == ["1980-06-01 00:00", "1980-06-01 06:00",
                                   "1980-06-01 12:00", "1980-06-01 18:00", "1980-06-02 00:00"]
    seconds = [cftime.datetime(1980, 6, 1, 12, calendar="standard")
               + timedelta(seconds=30 * i) for i in range(3)]
    assert _labels(seconds) == ["1980-06-01 12:00:00", "1980-06-01 12:00:30",
                                "1980-06-01 12:01:00"]


def test_irregular_steps_follow_the_axis_as_a_whole():
    # Monthly data with two months missing and one step of a few days: still months.
    months = [cftime.datetime(2001, m, 16, calendar="noleap") for m in (1, 2, 3, 6, 7, 8, 9)]
    assert _labels(months, "noleap") == ["2001-01", "2001-02", "2001-03", "2001-06",
                                         "2001-07", "2001-08", "2001-09"]
    # Yearly steps, but two dates fall in one year: those would read alike, so the whole
    # axis reads to the month.
    years = [cftime.datetime(*d, calendar="standard")
             for d in ((2000, 1, 1), (2000, 12, 31), (2002, 1, 1), (2003, 1, 1))]
    assert step_seconds([parse_label(d.isoformat()) for d in years], "standard") >= 359 * 86400
    assert _labels(years) == ["2000-01", "2000-12", "2002-01", "2003-01"]
    # Daily data with gaps of a week and a month: days.
    days = [cftime.datetime(2000, 1, 1, calendar="standard") + timedelta(days=k)
            for k in (0, 1, 2, 9, 10, 40, 41)]
    assert _labels(days)[3:5] == ["2000-01-10", "2000-01-11"]


def test_one_step_shows_the_full_date():
    assert _labels([cftime.datetime(1980, 6, 1, calendar="360_day")], "360_day") == [
        "1980-06-01"]
    assert _labels([cftime.datetime(1980, 6, 1, 12, calendar="standard")]) == [
        "1980-06-01 12:00"]
    # Two equal dates: no step either.
    same = [cftime.datetime(1980, 6, 1, 6, calendar="standard")] * 2
    assert _labels(same) == ["1980-06-01 06:00"] * 2


def test_resolution_and_parsing():
    assert parse_label("2000-01-02T03:04:05.250000") == (2000, 1, 2, 3, 4, 5, 250000)
    assert parse_label("2000-01-02 03:04") == (2000, 1, 2, 3, 4, 0, 0)
    assert parse_label("soon") is None
    years = [(y, 7, 2, 12, 0, 0, 0) for y in range(1990, 1995)]
    assert date_resolution(years, "standard") == "year"
    assert date_resolution(years, "360_day") == "year"


@pytest.mark.parametrize(("units", "calendar", "want"), [
    ("hour since 0000-01-01", None, "TIME = 4748.91 hour since 0000-01-01"),
    ("Month", None, "TIME = 4748.91 Month"),
    ("hours", "noleap", "TIME = 4748.91 hours"),
])
def test_undecodable_axis_reads_name_value_units(tmp_path, units, calendar, want):
    # Stored as float32, as the files that showed 'TIME = 4748.91' were.
    path = _write(tmp_path / "u.nc", [4748.91, 4749.91, 4750.91], units, calendar,
                  name="TIME", dtype="f4")
    with open_series(path, "tas", time_dim="TIME") as s:
        assert not s.time_axis().decoded
        labels = time_labels(s)
    assert labels[0] == want
    assert labels[2] == want.replace("4748.91", "4750.91")


def test_decoded_file_labels_and_a_missing_step(tmp_path):
    path = _write(tmp_path / "d.nc", [0.0, 0.25, 0.5, 0.75], "days since 2000-01-01",
                  "proleptic_gregorian")
    with open_series(path, "tas") as s:
        assert time_labels(s) == ["2000-01-01 00:00", "2000-01-01 06:00",
                                  "2000-01-01 12:00", "2000-01-01 18:00"]
    # A step whose date is missing (NaN time) is named by its index.
    labels = frame_labels(["2000-01-01T00:00:00", None, "2000-03-01T00:00:00"],
                          np.array([0.0, np.nan, 60.0]), calendar="standard",
                          units="days since 2000-01-01", name="time", time_dim="t")
    assert labels == ["2000-01", "t step 1", "2000-03"]


def test_raw_values_keep_float32_precision_and_stay_distinct():
    assert format_values(np.array([4748.91, 4749.91], np.float32).astype(float)) == [
        "4748.91", "4749.91"]
    assert format_values(np.array([1.0, 2.0, 3.0])) == ["1", "2", "3"]
    assert format_values(np.array([0.5, 1.0, np.nan])) == ["0.5", "1.0", None]
    # Consecutive values that 6 decimals would merge get more.
    assert format_values(np.array([1.0, 1.0000001, 1.0000002])) == [
        "1.0000000", "1.0000001", "1.0000002"]
    assert format_values(np.array([9.96921e36])) == ["9.96921e+36"]


def test_long_axis_step_from_a_spread_sample():
    # 20 000 six-hourly steps of a 360-day calendar (more than the sampled pairs), with a
    # gap of a month: still read to the minute, every label distinct.
    start = cftime.datetime(1950, 1, 1, calendar="360_day")
    dates = [start + timedelta(hours=6 * i) for i in range(20000)]
    dates = dates[:7000] + dates[7120:]
    labels = _labels(dates, "360_day")
    assert labels[:2] == ["1950-01-01 00:00", "1950-01-01 06:00"]
    assert labels[-1] == dates[-1].strftime("%Y-%m-%d %H:%M")
    assert len(set(labels)) == len(labels)
