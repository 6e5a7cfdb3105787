"""NetCDF-4 files compressed in chunks along time (ncreel.input.chunking through
ncreel.input.source): the values of every read pattern are xarray's, each chunk is
decompressed once by consecutive reads, and blocks end where chunks end."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
import xarray as xr
from ncreel.config.settings import SeriesSelection
from ncreel.input import chunking
from ncreel.input.source import open_series
from ncreel.region.restrict import RegionSeries
from ncreel.region.selection import open_selection
from ncreel.region.spec import region_from_config

NY, NX = 6, 8
LAT = np.linspace(-50.0, 50.0, NY)
LON = np.linspace(-140.0, 140.0, NX)


def write_chunked(path, n_time, *, chunk=4, t0=0, levels=None, zlib=True, seed=0,
                  names=("tas",)):
    """A NetCDF-4 file of `n_time` hourly steps of 'tas' (float32, with missing cells),
    zlib-compressed in chunks of `chunk` steps (``chunk=None``: contiguous); with `levels`,
    'tas' is (time, plev, lat, lon); `names` more variables alike. Returns the path."""
    rng = np.random.default_rng(seed)
    dims, shape = ("time", "lat", "lon"), (n_time, NY, NX)
    if levels:
        dims, shape = ("time", "plev", "lat", "lon"), (n_time, levels, NY, NX)
    data = {}
    for name in names:
        data[name] = rng.normal(280.0, 10.0, shape).astype("f4")
        data[name][..., 0, 0] = np.nan  # a cell always missing, another sometimes
        data[name][::3, ..., 1, 2] = np.nan
    coords = {"time": ("time", np.arange(t0, t0 + n_time, dtype="f8"),
                       {"units": "hours since 2000-01-01", "calendar": "standard"}),
              "lat": ("lat", LAT, {"units": "degrees_north", "standard_name": "latitude"}),
              "lon": ("lon", LON, {"units": "degrees_east", "standard_name": "longitude"})}
    if levels:
        coords["plev"] = ("plev", np.linspace(100000.0, 50000.0, levels), {"units": "Pa"})
    encoding = {"dtype": "f4", "_FillValue": np.float32(1e20)}
    if chunk is None:
        encoding["contiguous"] = True
    else:
        encoding.update(zlib=zlib, complevel=1 if zlib else 0,
                        chunksizes=(chunk, *shape[1:]) if not levels
                        else (chunk, 1, NY, NX))
    xr.Dataset({k: (dims, v) for k, v in data.items()}, coords=coords).to_netcdf(
        path, format="NETCDF4", engine="netcdf4", encoding=dict.fromkeys(data, encoding))
    return path


def direct(paths, select=None, name="tas"):
    """The files' `name` as xarray reads it (mask and scale), joined along time."""
    parts = []
    for p in paths:
        with xr.open_dataset(p, decode_times=False) as ds:
            parts.append(ds[name].isel(select or {}).values)
    return np.concatenate(parts)


@pytest.fixture
def chunk_reads(monkeypatch):
    """Each read libnetcdf is asked for, as ``(file, variable, chunks along time it
    touches)``: HDF5 decompresses a touched chunk once per read, so a chunk touched by
    one read only is decompressed once (the read itself is made as before)."""
    from xarray.backends.netCDF4_ import NetCDF4ArrayWrapper

    calls: list = []
    getitem = NetCDF4ArrayWrapper._getitem

    def counted(self, key):
        var = self.get_array(needs_lock=False)
        if var.chunking() != "contiguous" and "time" in var.dimensions:
            axis = var.dimensions.index("time")
            size = var.chunking()[axis]
            k = key[axis]
            steps = (range(*k.indices(var.shape[axis])) if isinstance(k, slice)
                     else np.atleast_1d(k).tolist())
            calls.append((self.datastore._filename, self.variable_name,
                          frozenset(int(t) // size for t in steps)))
        return getitem(self, key)

    monkeypatch.setattr(NetCDF4ArrayWrapper, "_getitem", counted)
    return calls


def touches(calls, variable="tas"):
    """How many reads touched each (file, chunk)."""
    return Counter((f, c) for f, v, chunks in calls if v == variable for c in chunks)


def blocks_of(series, start, stop, steps):
    """iter_blocks' blocks with a bound of `steps` float64 steps, as (t0, t1, values)."""
    return [(t0, t0 + b.shape[0], b)
            for t0, b in series.iter_blocks(start, stop, max_bytes=steps * NY * NX * 8)]


@pytest.mark.parametrize("pattern", ["frames", "blocks1", "blocks3", "blocks4", "blocks5",
                                     "blocks9", "middle", "backwards"])
def test_every_read_pattern_gives_xarrays_values(tmp_path, pattern):
    path = write_chunked(tmp_path / "day.nc", 22)  # 5 chunks of 4, the last of 2
    want = direct([path])
    with open_series(str(path), "tas") as s:
        assert s.file_chunking().read_whole == 4
        if pattern == "frames":
            got = np.concatenate([s.read(t, t + 1) for t in range(22)])
        elif pattern.startswith("blocks"):
            got = np.concatenate([b for _, _, b in blocks_of(s, 0, 22, int(pattern[6:]))])
        elif pattern == "middle":  # a shard's range, its start and end inside chunks
            got = np.concatenate([b for _, _, b in blocks_of(s, 5, 19, 3)])
            want = want[5:19]
        else:  # going back re-reads; a step is handed out once: a caller may write in it
            order = [3, 2, 1, 0, 4, 5, 4, 5, 6, 5, 7, 8, 9]
            got = []
            for t in order:
                block = s.read(t, t + 1)
                got.append(block.copy())
                block[:] = -1.0
            got, want = np.concatenate(got), want[order]
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("window", [(0, 22, 2), (1, 22, 3), (2, 21, 5), (3, 20, 4),
                                    (0, 22, 9)])
@pytest.mark.parametrize("steps", [1, 2, 5])
def test_a_stride_reads_its_steps_each_chunk_once(tmp_path, window, steps, chunk_reads):
    path = write_chunked(tmp_path / "day.nc", 22)
    want = direct([path])[slice(*window)]
    with open_series(str(path), "tas", window=window) as s:
        chunk_reads.clear()
        got = np.concatenate([b for _, _, b in blocks_of(s, 0, s.n_time, steps)])
        frames = np.concatenate([s.read(t, t + 1) for t in range(s.n_time)])
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(frames, want)
    # the blocks' pass, then the frames' pass: each chunk shown decompressed once in each
    shown = {t // 4 for t in range(*window)}
    assert touches(chunk_reads) == Counter({(str(path), c): 2 for c in shown})


def test_each_chunk_is_decompressed_once_by_frames_and_blocks(tmp_path, chunk_reads):
    """A shard's passes: frames one step at a time, then blocks of 3 steps against chunks
    of 4; without holding a chunk each frame's read decompressed its chunk again."""
    path = str(write_chunked(tmp_path / "day.nc", 24))
    with open_series(path, "tas") as s:
        chunk_reads.clear()
        for t in range(24):
            s.read(t, t + 1)
        assert touches(chunk_reads) == Counter({(path, c): 1 for c in range(6)})
        assert sum(v == "tas" for _, v, _ in chunk_reads) == 6  # one read per chunk
        chunk_reads.clear()
        blocks = blocks_of(s, 0, 24, 3)
        assert touches(chunk_reads) == Counter({(path, c): 1 for c in range(6)})
        # blocks end where chunks end: 3 + 1 steps per chunk, never across two
        assert [(a, b) for a, b, _ in blocks][:4] == [(0, 3), (3, 4), (4, 7), (7, 8)]


def test_files_without_whole_chunk_reads_are_read_as_they_are(tmp_path, chunk_reads):
    """Per-step chunks, chunks without compression (HDF5 reads part of them) and a
    contiguous variable: nothing is held, each read reads its own steps."""
    for name, kw in (("step.nc", {"chunk": 1}), ("plain.nc", {"zlib": False}),
                     ("contiguous.nc", {"chunk": None})):
        path = write_chunked(tmp_path / name, 8, **kw)
        with open_series(str(path), "tas") as s:
            assert s.file_chunking().read_whole is None and s.held_chunk_bytes() == 0
            np.testing.assert_array_equal(np.concatenate([s.read(t, t + 1) for t in range(8)]),
                                          direct([path]))
            assert s._held == {}
            assert [(a, b) for a, b, _ in blocks_of(s, 0, 8, 3)] == [(0, 3), (3, 6), (6, 8)]


def test_several_files_each_chunk_once(tmp_path, chunk_reads):
    """Three files of 10, 7 and 9 steps in chunks of 4 (a file's last chunk shorter): a
    block or a frame never holds one file's chunk for another's steps."""
    paths = [str(write_chunked(tmp_path / f"p{k}.nc", n, t0=t0, seed=k))
             for k, (n, t0) in enumerate([(10, 0), (7, 10), (9, 17)])]
    want = direct(paths)
    with open_series(paths, "tas") as s:
        assert s.n_time == 26
        chunk_reads.clear()
        frames = np.concatenate([s.read(t, t + 1) for t in range(26)])
        assert set(touches(chunk_reads).values()) == {1}
        assert len(touches(chunk_reads)) == 3 + 2 + 3
        for steps in (2, 3, 6, 26):
            chunk_reads.clear()
            blocks = blocks_of(s, 0, 26, steps)
            np.testing.assert_array_equal(np.concatenate([b for *_, b in blocks]), want)
            assert set(touches(chunk_reads).values()) == {1}
            # a block ends where a chunk (or a file) ends, but when the chunk is longer
            # than the bound, and the last at stop
            starts = s.chunk_starts(0, 26)
            assert starts == [4, 8, 10, 14, 17, 21, 25]
            for a, b, _ in blocks:
                assert b - a <= steps
                assert b in (*starts, 26) or not any(a < c < b for c in starts)
    np.testing.assert_array_equal(frames, want)


def test_select_reads_one_level_of_each_chunk_once(tmp_path, chunk_reads):
    path = str(write_chunked(tmp_path / "plev.nc", 12, levels=3))
    want = direct([path], {"plev": 1})
    with open_series(path, "tas", select={"plev": 1}) as s:
        chunk_reads.clear()
        got = np.concatenate([s.read(t, t + 1) for t in range(12)])
        assert touches(chunk_reads) == Counter({(path, c): 1 for c in range(3)})
        assert s.held_chunk_bytes() == 3 * NY * NX * 4
    np.testing.assert_array_equal(got, want)


def test_a_region_reads_its_cells_of_each_chunk_once(tmp_path, chunk_reads):
    path = str(write_chunked(tmp_path / "day.nc", 14))
    region = region_from_config({"lon": [-100, 60], "lat": [-30, 40]})
    sel = SeriesSelection(paths=[path], variable="tas", time_dim=None, select={}, lat=None,
                          lon=None, time=None, region=region.to_params())
    rows = (LAT >= -30) & (LAT <= 40)
    cols = (LON >= -100) & (LON <= 60)
    want = direct([path])[:, rows][:, :, cols]
    with open_selection(sel) as s:
        assert isinstance(s, RegionSeries) and s.shape == (14, rows.sum(), cols.sum())
        chunk_reads.clear()
        got = np.concatenate([s.read(t, t + 1) for t in range(14)])
        assert touches(chunk_reads) == Counter({(path, c): 1 for c in range(4)})
        blocks = np.concatenate([b for *_, b in blocks_of(s, 3, 14, 1)])
        # the cut's steps are held, not the whole grid's
        assert s.held_chunk_bytes() == 3 * int(rows.sum() * cols.sum()) * 4
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(blocks, want[3:])


def test_a_chunk_above_the_bound_is_not_held(tmp_path, monkeypatch, chunk_reads):
    """A file chunked along its whole time axis: holding the rest of its one chunk would
    hold the whole variable; above the bound nothing is held, and values stay right."""
    path = str(write_chunked(tmp_path / "long.nc", 24, chunk=24))
    monkeypatch.setattr(chunking, "MAX_HELD_BYTES", 10 * NY * NX * 4)
    want = direct([path])
    with open_series(path, "tas") as s:
        assert s.file_chunking().whole_axis
        assert s.held_chunk_bytes() == 10 * NY * NX * 4
        first = s.read(0, 10)
        assert s._held == {}  # 14 steps left: above the bound
        second = s.read(10, 24)
        s.read(0, 15)
        assert (s._held["tas"].first, s._held["tas"].stop) == (15, 24)  # 9 steps left: held
        chunk_reads.clear()
        np.testing.assert_array_equal(s.read(15, 24), want[15:])
        assert chunk_reads == []
    np.testing.assert_array_equal(np.concatenate([first, second]), want)


def test_chunking_says_what_a_chunk_costs(tmp_path):
    with open_series(str(write_chunked(tmp_path / "day.nc", 22)), "tas") as s:
        c = s.file_chunking()
    assert (c.chunks, c.time_chunk, c.read_whole, c.whole_axis) == ((4, NY, NX), 4, 4, False)
    assert c.filters == ("zlib",) and c.chunk_bytes() == 4 * NY * NX * 4
    assert c.describe() == f"(4, {NY}, {NX}) along (time, lat, lon), zlib"
    with open_series(str(write_chunked(tmp_path / "c.nc", 5, chunk=None)), "tas") as s:
        assert s.file_chunking().describe() == "contiguous (not chunked)"


def test_statistics_and_the_table_calibration_read_each_chunk_once(tmp_path, chunk_reads):
    """The statistics job (blocks of 3 steps against chunks of 4) decompresses every chunk
    once: in its one pass, where it counts each value (this field), else once in each of
    its two; calibrate_table's probe reads its steps as a shard's rows pass does (one
    block here), its last chunk once."""
    from ncreel.cells import cells_settings
    from ncreel.config.settings import CellsSettings
    from ncreel.jobs.stats import series_statistics
    from ncreel.jobs.tablecalib import calibrate_table
    from test_jobs_tablecalib import ENCODE, RENDER

    path = str(write_chunked(tmp_path / "day.nc", 24))
    with open_series(path, "tas") as s:
        chunk_reads.clear()
        stats, mean = series_statistics(s, max_block_bytes=3 * NY * NX * 8)
    assert stats["reads"] == 1
    assert touches(chunk_reads) == Counter({(path, c): 1 for c in range(6)})
    want = direct([path])
    with np.errstate(invalid="ignore"):  # a cell never finite: NaN
        expect = np.nansum(want, axis=0, dtype="f8") / np.isfinite(want).sum(axis=0)
    np.testing.assert_allclose(mean, expect)
    assert stats["n_finite"] == np.isfinite(want).sum()
    sel = SeriesSelection(paths=(path,), variable="tas", time_dim="time", select={},
                          lat=None, lon=None, time=None)
    chunk_reads.clear()
    calibrate_table(sel, CellsSettings.from_params(cells_settings({})), render=RENDER,
                    encode=ENCODE, n_time=24, probe_frames=10, frames_per_shard=24)
    assert touches(chunk_reads) == Counter({(path, c): 1 for c in range(3)})


@pytest.mark.parametrize("region", [None, {"lon": [-100, 60], "lat": [-30, 40]}])
def test_other_variables_are_read_each_chunk_once_beside_the_series(tmp_path, chunk_reads,
                                                                    region):
    """Overlays and cell models read other variables (read_variable) block by block, as
    the frames read the series: each variable's chunks once, each held apart."""
    path = str(write_chunked(tmp_path / "uv.nc", 14, names=("tas", "uas", "vas")))
    reg = region_from_config(region)
    sel = SeriesSelection(paths=[path], variable="tas", time_dim=None, select={}, lat=None,
                          lon=None, time=None, region=None if reg is None else reg.to_params())
    with open_selection(sel) as s:
        chunk_reads.clear()
        got = {k: [] for k in ("tas", "uas", "vas")}
        for t in range(14):  # a frame with its vectors' fields
            got["tas"].append(s.read(t, t + 1))
            got["uas"].append(s.read_variable("uas", t, t + 1))
            got["vas"].append(s.read_variable("vas", t, t + 1))
            if t == 12:  # step 13 of the last chunk, of each variable, held apart
                assert {k: h.first for k, h in s._held.items()} == dict.fromkeys(got, 13)
        for name in got:
            assert touches(chunk_reads, name) == Counter({(path, c): 1 for c in range(4)})
        cells = s.ny * s.nx
        assert s.held_chunk_bytes(["tas", "uas", "vas"]) == 3 * 3 * cells * 4
        assert s.held_chunk_bytes(["uas"]) == s.held_chunk_bytes() == 3 * cells * 4
    for name, parts in got.items():
        want = direct([path], name=name)
        if region is not None:
            want = want[:, (LAT >= -30) & (LAT <= 40)][:, :, (LON >= -100) & (LON <= 60)]
        np.testing.assert_array_equal(np.concatenate(parts), want.astype("f8"))


def test_two_threads_reading_one_series_take_turns(tmp_path, monkeypatch):
    """A shard job's rows thread reads (a cell model's other variable, here the same one)
    while its frames are read: the held chunks are shared state, so reads take turns,
    and each gets xarray's values."""
    import threading
    import time

    from ncreel.input.source import Series

    path = write_chunked(tmp_path / "a.nc", 40, chunk=8)
    want = direct([path])
    inside, overlaps = [], []
    unlocked = Series._read_run_unlocked

    def watched(self, *args, **kw):
        if inside:
            overlaps.append(threading.current_thread().name)
        inside.append(1)
        time.sleep(0.002)  # the other thread runs now, if nothing stops it
        try:
            return unlocked(self, *args, **kw)
        finally:
            inside.pop()

    monkeypatch.setattr(Series, "_read_run_unlocked", watched)
    got: dict = {}
    errors: list = []
    with open_series([str(path)], "tas") as s:
        def frames():
            try:
                got["frames"] = [s.read(t, t + 1)[0] for t in range(40)]
            except Exception as err:  # noqa: BLE001 (reported below)
                errors.append(err)

        def rows():
            try:
                got["rows"] = [s.read_variable("tas", t, t + 3) for t in range(0, 40, 3)]
            except Exception as err:  # noqa: BLE001
                errors.append(err)

        threads = [threading.Thread(target=frames), threading.Thread(target=rows)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert not errors and not overlaps
    np.testing.assert_array_equal(np.stack(got["frames"]), want)
    np.testing.assert_array_equal(np.concatenate(got["rows"]), want)
