"""Reading series (ncreel.input.source) from real NetCDF files: slices, selections, files in time
order, overlapping times, bad input."""

import re
from pathlib import Path

import numpy as np
import pytest
import xarray as xr
from ncreel.core.errors import NcreelError
from ncreel.input.source import open_series
from ncreel.region.selection import open_selection


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
    with pytest.raises(NcreelError, match=r"not 2-D per time step: extra dims pressure.*"
                                          r"by coordinate value with config key sel or by "
                                          r"index with select"):
        open_series(path, "z")
    # A grid dimension chosen instead of the extra one: said so, not "need two spatial dims"
    with pytest.raises(NcreelError, match=r"'latitude' of variable 'z' is a spatial dimension "
                                          r"of its grid: .* to cut the grid use region"):
        open_series(path, "z", select={"latitude": 3})
    with open_series(path, "z", select={"pressure": 0}) as s:
        assert s.shape == (65, 29, 49)
        assert s.time_axis().labels[0].startswith("1948-") or s.time_axis().decoded


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
    with pytest.raises(NcreelError, match=r"is a directory, neither a NetCDF file nor a Zarr "
                                          r"store \(no zarr.json, .zgroup or .zarray in it\): "
                                          r"name its files"):
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


# The time axis is never guessed ---------------------------------------------------------


# Fill values in the time coordinate are missing steps -----------------------------------


# Files whose times overlap ----------------------------------------------------------------

def _days_file(path, days, *, change=None, calendar="noleap",
               units="days since 2000-01-01"):
    """``tas(time, lat, lon)`` on the given days since 2000-01-01; value 100*day + cell."""
    days = np.asarray(days, dtype=np.float64)
    values = (100.0 * days[:, None, None] + np.arange(6.0).reshape(1, 2, 3)).astype(np.float32)
    if change is not None:
        values[np.isin(days, change)] += 0.5  # a re-run that differs on these days
    values[:, 0, 0] = np.nan  # a masked cell: NaN equals NaN when comparing repeats
    xr.Dataset({"tas": (("time", "lat", "lon"), values, {"units": "K"})},
               coords={"time": ("time", days, {"units": units, "calendar": calendar}),
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
    from ncreel.config.settings import SeriesSelection

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
    assert spec["steps"] == [[0, 0, 6], [1, 3, 6]]
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
    # The later file's kept steps are two runs (days 1-4 and 6), and its times fall
    # between the earlier file's: read in time order, crossing from file to file.
    a = _days_file(tmp_path / "a.nc", [0, 5])
    b = _days_file(tmp_path / "b.nc", range(1, 7))
    with open_series([a, b], "tas") as s:
        assert s.steps == ((0, 0, 1), (1, 0, 4), (0, 1, 2), (1, 5, 6))
        assert f"times of '{b}' (2000-01-02T00:00:00 .. 2000-01-07T00:00:00) fall inside " \
            "those of" in s.note and s.note.endswith("steps read in time order")
        np.testing.assert_array_equal(s.read(0, 7), _truth([0, 1, 2, 3, 4, 5, 6]))
        np.testing.assert_array_equal(s.read(4, 7), _truth([4, 5, 6]))


def test_a_time_repeated_inside_one_file(tmp_path):
    import netCDF4

    # ncrcat of two overlapping files: days 0-3 then 2-5 in one file.
    days = [0, 1, 2, 3, 2, 3, 4, 5]
    path = _days_file(tmp_path / "cat.nc", days)
    with open_series(path, "tas") as s:
        assert s.steps == ((0, 0, 4), (0, 6, 8))
        assert f"'{path}' repeats 2 times 2000-01-03T00:00:00 .. 2000-01-04T00:00:00 of " \
            "itself with equal values of 'tas': kept once, from itself" in s.note
        np.testing.assert_array_equal(s.read(0, 6), _truth(range(6)))
    bad = _days_file(tmp_path / "bad.nc", days)
    with netCDF4.Dataset(bad, "a") as nc:
        nc["tas"][5] = nc["tas"][5] + 1.0  # the second day 3 differs from the first
    with pytest.raises(NcreelError, match=rf"input '{bad}' holds 'tas' twice at 1 time "
                       r"2000-01-04T00:00:00 with different values"):
        open_series(bad, "tas")


# Times out of order ---------------------------------------------------------------------

def _reopened(s):
    from ncreel.config.settings import SeriesSelection

    return open_selection(SeriesSelection.from_params(s.spec()))


@pytest.mark.parametrize("days", [[0, 2, 1, 3], [5, 4, 3, 2, 1, 0], [3, 0, 1, 2]])
def test_times_out_of_order_in_a_file_are_read_in_time_order(tmp_path, days):
    # Used as they came once: time_index 1 was 3 January, and nothing said so.
    path = _days_file(tmp_path / "m.nc", days)
    with open_series(path, "tas") as s:
        assert s.time_note.startswith(f"'{path}' holds its times out of order (") and \
            s.time_note.endswith("steps read in time order") and s.time_note in s.note
        want = sorted(days)
        np.testing.assert_array_equal(s.read(0, s.n_time), _truth(want))
        np.testing.assert_array_equal(s.read(1, 3), _truth(want[1:3]))
        labels = s.time_axis().labels
        assert labels == [f"2000-01-0{d + 1}T00:00:00" for d in want]
        np.testing.assert_array_equal(s.time_axis().values, want)
        with _reopened(s) as again:  # every job reads the same order, without a note
            np.testing.assert_array_equal(again.read(0, s.n_time), _truth(want))
            assert again.time_axis().labels == labels and again.note == ""


def test_files_whose_times_interleave_are_read_in_time_order(tmp_path):
    a = _days_file(tmp_path / "a.nc", [0, 2, 4])
    b = _days_file(tmp_path / "b.nc", [1, 3, 5, 6])
    with open_series(str(tmp_path / "*.nc"), "tas") as s:
        assert s.steps == ((0, 0, 1), (1, 0, 1), (0, 1, 2), (1, 1, 2), (0, 2, 3), (1, 2, 4))
        assert s.time_note == (f"times of '{b}' (2000-01-02T00:00:00 .. 2000-01-07T00:00:00) "
                               f"fall inside those of '{a}' (2000-01-01T00:00:00 .. "
                               "2000-01-05T00:00:00): steps read in time order")
        np.testing.assert_array_equal(s.read(0, 7), _truth(range(7)))
        np.testing.assert_array_equal(s.read(2, 5), _truth(range(2, 5)))
        assert s.time_axis().labels == [f"2000-01-0{d + 1}T00:00:00" for d in range(7)]
    # Files one after the other: as they are, no note.
    c = _days_file(tmp_path / "c.nc", [7, 8])
    with open_series([c, b], "tas") as s:
        assert s.steps is None and s.time_note == "" and s.counts == (4, 2)


def test_undecoded_times_out_of_order_are_ordered_by_their_numbers(tmp_path):
    path = _days_file(tmp_path / "m.nc", [10, 30, 20], units="model days")
    with open_series(path, "tas") as s:
        assert "first 20 after 30" in s.time_note
        np.testing.assert_array_equal(s.time_axis().values, [10, 20, 30])
        np.testing.assert_array_equal(s.read(0, 3), _truth([10, 20, 30]))


@pytest.mark.parametrize("case, message", [
    ("missing", "times out of order (2000-01-02T00:00:00 after 2000-01-03T00:00:00) beside 1 "
                "step(s) without a time: where those go cannot be decided"),
    ("calendars", "times of different calendars or units cannot be put in one order"),
    ("units", "(calendar noleap) and"),
    ("timeless", "has no time ncreel can decode (2 of 2 'time' values are missing (fill "
                 "values); those steps have no time), so its place among the 2 input files "
                 "cannot be decided"),
])
def test_an_order_that_cannot_be_decided_is_one_line(tmp_path, case, message):
    if case == "missing":
        paths = [_days_file(tmp_path / "m.nc", [0, 2, np.nan, 1])]
    elif case == "calendars":
        paths = [_days_file(tmp_path / "a.nc", [0, 1]),
                 _days_file(tmp_path / "b.nc", [2, 3], calendar="360_day")]
    elif case == "units":
        paths = [_days_file(tmp_path / "a.nc", [0, 1]),
                 _days_file(tmp_path / "b.nc", [2, 3], units="model days")]
    else:
        paths = [_days_file(tmp_path / "a.nc", [0, 1]),
                 _days_file(tmp_path / "b.nc", [np.nan, np.nan])]
    with pytest.raises(NcreelError, match=re.escape(message)) as err:
        open_series(paths, "tas")
    assert "\n" not in str(err.value) and paths[-1] in str(err.value)
    # Calendar names cftime takes for one another are one calendar.
    same = [_days_file(tmp_path / "g.nc", [0, 1], calendar="gregorian"),
            _days_file(tmp_path / "s.nc", [2, 3], calendar="standard")]
    with open_series(same, "tas") as s:
        assert s.n_time == 4 and s.time_note == ""
    # Steps without a time among steps in order stay where they are.
    path = _days_file(tmp_path / "gap.nc", [0, np.nan, 2])
    with open_series(path, "tas") as s:
        assert s.steps is None and s.time_note == ""


def test_input_paths_say_the_real_reason(tmp_path):
    import os

    from ncreel.core.errors import NcreelError
    from ncreel.input.source import resolve_paths

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
    import tempfile

    from ncreel.core.errors import NcreelError
    from ncreel.input.source import resolve_paths

    if os.geteuid() != 0:
        f = tmp_path / "secret.nc"
        f.write_bytes(b"CDF")
        f.chmod(0)
        with pytest.raises(NcreelError, match=r"cannot be read \(permission denied\)"):
            resolve_paths(str(f))
        return
    # Root reads every file: the same check in a forked child that has become user
    # nobody (real and effective ids: os.access asks for the real one), on a file in a
    # directory nobody can enter (pytest's own temp dirs are root's alone).
    with tempfile.TemporaryDirectory(dir="/tmp") as d:
        os.chmod(d, 0o755)
        f = Path(d) / "secret.nc"
        f.write_bytes(b"CDF")
        f.chmod(0)
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: never returns into pytest
            try:
                os.setgroups([])
                os.setgid(65534)
                os.setuid(65534)
                try:
                    resolve_paths(str(f))
                    said = "no error"
                except NcreelError as err:
                    said = str(err)
                os.write(write, said.encode())
            finally:
                os._exit(0)
        os.close(write)
        with os.fdopen(read) as fh:
            said = fh.read()
        os.waitpid(pid, 0)
    assert "cannot be read (permission denied)" in said, said
