"""Config ``time_format``: frame dates in a strftime-style format, in the file's calendar.

Exact strings in 360_day, noleap, julian and standard calendars, agreement with cftime's
and Python's strftime where those are right, one line for a bad format, a warning for a
format that shows different dates alike, and the format through the run's params into the
frames a shard job draws (panels included: they still match their files by date).
"""

from __future__ import annotations

import datetime
import json

import cftime
import matplotlib
import numpy as np
import pytest
import xarray as xr
import yaml
from conftest import ROOT
from layouts import LAT_ATTRS, LON_ATTRS, time_coord
from ncreel.core.errors import NcreelError
from ncreel.jobs.runconfig import load_config
from ncreel.render.timelabels import (
    check_time_format,
    frame_labels,
    strftime_date,
    time_format_note,
)
from snakemake.utils import validate

matplotlib.use("Agg")


@pytest.mark.parametrize(("date", "calendar", "time_format", "expected"), [
    # 30 February exists in a 360-day year; day 60 of it; days of the week are cftime's
    # continuous count of the calendar's own days.
    ((2000, 2, 30, 6, 0, 0, 0), "360_day", "%d %b %Y", "30 Feb 2000"),
    ((2000, 2, 30, 6, 0, 0, 0), "360_day", "Day %j of %Y", "Day 060 of 2000"),
    ((2000, 2, 30, 6, 0, 0, 0), "360_day", "%A %d %B %Y %H:%M",
     "Friday 30 February 2000 06:00"),
    ((2000, 12, 30, 0, 0, 0, 0), "360_day", "%j", "360"),
    ((1861, 6, 1, 0, 0, 0, 0), "360_day", "%c", "Mon Jun  1 00:00:00 1861"),
    ((1861, 6, 1, 0, 0, 0, 0), "360_day", "%x %X", "06/01/61 00:00:00"),
    # noleap: no 29 February even in 2000, so 1 March is day 60 (a Tuesday, so 670 days
    # later, 2001-12-31, is a Sunday).
    ((2000, 3, 1, 0, 0, 0, 0), "noleap", "Day %j of %Y", "Day 060 of 2000"),
    ((2001, 12, 31, 18, 30, 0, 0), "noleap", "%Y-%m-%d %H:%M", "2001-12-31 18:30"),
    ((2001, 12, 31, 18, 30, 0, 0), "noleap", "%I:%M %p, %a %d %b", "06:30 PM, Sun 31 Dec"),
    # standard: a leap day, day 61 after it.
    ((2000, 2, 29, 0, 0, 0, 0), "standard", "%A %d %B %Y", "Tuesday 29 February 2000"),
    ((2000, 3, 1, 0, 0, 0, 0), "standard", "%j", "061"),
    ((1999, 6, 15, 12, 0, 30, 250000), "standard", "%B %Y, %H:%M:%S.%f",
     "June 1999, 12:00:30.250000"),
    ((2000, 1, 1, 0, 0, 0, 0), "standard", "%U %W %w %u 100%%", "00 00 6 6 100%"),
    # julian: 1900 is a leap year (it was a Tuesday).
    ((1900, 2, 29, 0, 0, 0, 0), "julian", "%a %d %b %Y", "Tue 29 Feb 1900"),
    # Years before 1000 and before year 0 keep four digits.
    ((850, 6, 1, 0, 0, 0, 0), "360_day", "%Y/%y", "0850/50"),
    ((-50, 6, 1, 0, 0, 0, 0), "proleptic_gregorian", "%Y", "-0050"),
])
def test_exact_strings_in_the_files_calendar(date, calendar, time_format, expected):
    assert strftime_date(date, time_format, calendar) == expected


def test_agrees_with_python_strftime_on_standard_dates():
    rng = np.random.default_rng(3)
    codes = "%a %A %b %B %d %H %I %p %M %S %f %j %w %u %U %W %y %Y %m %c %x %X %%"
    start = datetime.datetime(1600, 1, 1)
    for seconds, micro in zip(rng.integers(0, 400 * 365 * 86400, 2000).tolist(),
                              rng.integers(0, 10**6, 2000).tolist(), strict=True):
        d = start + datetime.timedelta(seconds=seconds, microseconds=micro)
        parts = (*d.timetuple()[:6], d.microsecond)
        assert strftime_date(parts, codes, "standard") == d.strftime(codes)


@pytest.mark.parametrize("calendar", ["360_day", "noleap", "all_leap", "julian"])
def test_agrees_with_cftime_strftime_in_other_calendars(calendar):
    # cftime's strftime is right for these codes (its %x and %C keep a stand-in year's
    # digits, which is why ncreel formats the fields itself).
    codes = "%a %A %b %B %d %H %M %S %j %w %Y %m %I %p"
    start = cftime.datetime(1850, 1, 1, calendar=calendar)
    for days in range(0, 3 * 366, 7):
        d = start + datetime.timedelta(days=days, hours=days % 24)
        parts = (d.year, d.month, d.day, d.hour, d.minute, d.second, d.microsecond)
        assert strftime_date(parts, codes, calendar) == d.strftime(codes)


@pytest.mark.parametrize(("time_format", "says"), [
    ("%d %Q %Y", "%Q: not a strftime code"),
    ("%Y 100%", "a lone % at the end"),
    ("%H:%M %Z", "%Z: CF time has no time zone"),
    ("%G-W%V", "%G: ISO week-years are Gregorian only"),
    ("%s", "%s: seconds since 1970"),
    ("%d\n%b", "one line"),
    ("", "null for the automatic date"),
])
def test_a_bad_format_is_one_line_naming_time_format(time_format, says):
    with pytest.raises(NcreelError) as err:
        check_time_format(time_format)
    text = str(err.value)
    assert text.startswith("config key 'time_format'") and says in text
    assert "\n" not in text


def _labels(iso, time_format, calendar="360_day"):
    return frame_labels(iso, np.arange(len(iso), dtype=float), calendar=calendar,
                        units="days since 1850-01-01", name="time", time_dim="time",
                        time_format=time_format)


def test_frame_labels_use_the_format_and_keep_the_fallback_of_undecoded_steps():
    iso = ["2000-01-30T00:00:00", "2000-02-30T00:00:00", None, "2000-04-30T00:00:00"]
    assert _labels(iso, None) == ["2000-01", "2000-02", "time = 2 days since 1850-01-01",
                                  "2000-04"]
    assert _labels(iso, "%d %B %Y") == ["30 January 2000", "30 February 2000",
                                        "time = 2 days since 1850-01-01", "30 April 2000"]
    with pytest.raises(NcreelError, match="time_format"):
        _labels(iso, "%Q")


def test_a_format_that_shows_dates_alike_is_a_warning():
    iso = [f"2000-{m:02d}-16T00:00:00" for m in range(1, 13)]
    same = time_format_note(_labels(iso, "%Y"), iso, "%Y")
    assert "every frame's time reads '2000' (12 steps)" in same and "\n" not in same
    iso2 = iso + [f"2001-{m:02d}-16T00:00:00" for m in range(1, 13)]
    some = time_format_note(_labels(iso2, "%B"), iso2, "%B")
    assert "12 of 24 steps read like an earlier, different date" in some
    assert "'January'" in some
    assert time_format_note(_labels(iso2, "%b %Y"), iso2, "%b %Y") is None
    # Undecoded steps do not count.
    assert time_format_note(["x", "x"], [None, None], "%Y") is None


def test_room_is_kept_for_the_widest_label_of_names():
    # Every label as long as the others, but day and month names differ in width: the
    # room is the widest label's, not the widest of a sample.
    import matplotlib.pyplot as plt
    from ncreel.render.frametext import _Measure, _widest

    start = datetime.date(2001, 1, 1)
    labels = [strftime_date((d.year, d.month, d.day, 0, 0, 0, 0), "%a %d %b %Y %H:%M",
                            "standard")
              for d in (start + datetime.timedelta(days=i) for i in range(3 * 365))]
    fig = plt.figure(figsize=(9.6, 5.4), dpi=100)
    try:
        measure = _Measure(fig, fig.canvas.get_renderer())
        widths = {s: measure(s, 10)[0] for s in set(labels)}
        widest = max(widths.values())
        # Length does not decide: 20 of the longest labels (all are as long) may all be
        # narrower than the widest.
        assert len({len(s) for s in labels}) == 1
        assert sum(w < widest for w in widths.values()) > 20
        assert _widest(labels, 10, measure)[0] == widest
    finally:
        plt.close(fig)


# --- Through the run: config, params, shard job, panels -------------------------------


def user_config(**values) -> dict:
    """config/config.yaml (what a user starts from) with `values` over it."""
    config = yaml.safe_load((ROOT / "config" / "config.yaml").read_text()) or {}
    return {**config, **values}


def test_bad_format_stops_load_config_with_one_line(sample_nc):
    with pytest.raises(NcreelError) as err:
        load_config(user_config(input=str(sample_nc), time_format="%Y %Q"),
                    validate=validate)
    assert str(err.value).startswith("config key 'time_format' = '%Y %Q': %Q")


def _shard_frame(tmp_path, rc, name):
    """Render the run's steps 0..2 as a shard job does; return frame 1's pixels."""
    from ncreel.cells import cells_settings
    from ncreel.config.settings import (
        CellsSettings,
        EncodeSettings,
        RenderSettings,
        SeriesSelection,
    )
    from ncreel.input.identity import input_identities
    from ncreel.jobs.shard import run_shard
    from ncreel.run.shardplan import Shard
    from PIL import Image

    out = tmp_path / name
    out.mkdir()
    (out / "stats.json").write_text(json.dumps(
        {"vmin": 270.0, "vmax": 310.0, "inputs": input_identities(rc.inputs)}))
    np.save(out / "cell_mean.npy", np.zeros((rc.grid["ny"], rc.grid["nx"])))
    cells = CellsSettings.from_params(cells_settings(
        {"model": "field", "geometry": "none", "compression": "none",
         "compression_level": None, "params": {}}))
    run_shard(SeriesSelection.from_params(rc.series), Shard(0, 0, 3),
              stats_json=out / "stats.json", cell_mean_npy=out / "cell_mean.npy",
              frames_dir=out / "frames", rows_path=out / "rows.copy",
              render=RenderSettings.from_params(rc.render), segment=out / "seg.mp4",
              cells=cells, encode=EncodeSettings(fps=10, crf=18, preset="ultrafast"),
              png_times=[1])
    return np.asarray(Image.open(out / "frames" / "frame_000001.png"))


def test_the_format_reaches_the_frames_a_shard_job_draws(sample_nc, tmp_path):
    from ncreel.config.settings import RenderSettings, SeriesSelection
    from ncreel.region.selection import open_selection
    from ncreel.render.segment import make_renderer

    small = {"width": 480, "height": 270, "input": str(sample_nc)}
    auto = load_config(user_config(**small), validate=validate)
    fmt = "%A %d %B %Y %H:%M"
    named = load_config(user_config(time_format=fmt, **small), validate=validate)
    # Params: without time_format as before (no rerun of old runs); a format is in them,
    # so a changed format re-renders.
    assert "time_format" not in auto.render and named.render["time_format"] == fmt
    assert named.notes == ()  # annual dates: every label differs
    other = load_config(user_config(time_format="%Y", **small), validate=validate)
    assert other.render != named.render
    a, b = _shard_frame(tmp_path, auto, "auto"), _shard_frame(tmp_path, named, "named")
    # The same frame drawn by a renderer told the label: the job drew exactly that text.
    with open_selection(SeriesSelection.from_params(named.series)) as s:
        field = next(s.iter_blocks(1, 2))[1][0]
        for rc, got, label in ((named, b, "Monday 01 June 1861 00:00"), (auto, a, "1861")):
            r = make_renderer(s, RenderSettings.from_params(rc.render), vmin=270.0,
                              vmax=310.0)
            try:
                want = r.draw(field, label)[..., :3]
                assert r.label.get_text() == label
                np.testing.assert_array_equal(got[..., :3], want)
            finally:
                r.close()
    band = slice(0, 40)  # the header: the date differs, the map does not
    assert (a[band] != b[band]).any() and (a[60:200, 20:300] == b[60:200, 20:300]).all()


def _write(path, *, start, n):
    data = np.arange(start, start + n, dtype=np.float32)[:, None, None] + np.zeros((n, 4, 5),
                                                                                    "f4")
    xr.Dataset({"tas": (("time", "lat", "lon"), data, {"units": "K"})},
               coords={"time": time_coord(n, start=start),
                       "lat": ("lat", np.linspace(-30, 30, 4), LAT_ATTRS),
                       "lon": ("lon", np.linspace(0, 80, 5), LON_ATTRS)}).to_netcdf(path)
    return str(path)


def test_panels_match_by_date_whatever_the_format_shows(tmp_path):
    from ncreel.config.settings import RenderSettings, SeriesSelection
    from ncreel.jobs.stats import panel_statistics
    from ncreel.region.selection import open_selection
    from ncreel.render.segment import PanelFrames, time_labels

    main = _write(tmp_path / "main.nc", start=3, n=4)  # 2000-01-04 .. 01-07
    other = _write(tmp_path / "other.nc", start=0, n=10)  # 2000-01-01 .. 01-10
    # "%B %Y" reads every step "January 2000": matched by it, main's steps would all be
    # other's first.
    cfg = user_config(input=main, variable="tas", width=480, height=270,
                      panels=[{}, {"input": other}], time_format="%B %Y")
    rc = load_config(cfg, validate=validate)
    layout = rc.render["panels"]
    assert layout["panels"][1]["steps"] == [[0, 3, 4]]
    assert len(rc.notes) == 1 and "every frame's time reads 'January 2000'" in rc.notes[0]
    render = RenderSettings.from_params(rc.render)
    with open_selection(SeriesSelection.from_params(rc.series)) as s:
        labels = time_labels(s, render.time_format)
    assert labels == ["January 2000"] * 4
    with PanelFrames(layout, render, panel_statistics(layout, 4), labels) as source:
        for t, (fields, label) in source.frames(0, 4, 2**20):
            assert fields[1][0, 0] == fields[0][0, 0] == 3 + t  # the same date in both
            source.renderer.draw(fields, label)
            assert source.renderer.label.get_text() == "January 2000"
