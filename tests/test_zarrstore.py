"""Zarr stores as input (ncreel.input.zarrstore through ncreel.input.source): formats 2 and 3,
consolidated or not, read chunk-aware, identity, and the one-line errors."""

from __future__ import annotations

import os
import warnings
from collections import Counter

import numpy as np
import pytest
import xarray as xr
from ncreel.core.errors import NcreelError
from ncreel.input.identity import check_inputs, input_identities, input_stamps
from ncreel.input.source import open_series, resolve_paths

STORES = [(2, True), (2, False), (3, True), (3, False)]


def write_store(nc, path, *, zarr_format=3, consolidated=False, chunk=4, group=None,
                steps=None):
    """The real sample (or `steps` of it) written as a Zarr store with xarray's to_zarr."""
    with xr.open_dataset(nc, decode_times=False) as ds:
        ds = ds[["air_temperature"]].load()
    if steps is not None:
        ds = ds.isel(time=slice(0, steps))
    with warnings.catch_warnings():  # zarr's note that consolidated v3 is not in the spec
        warnings.simplefilter("ignore")
        ds.chunk({"time": chunk}).to_zarr(path, zarr_format=zarr_format,
                                          consolidated=consolidated, group=group, mode="w")
    return path


@pytest.fixture
def chunk_reads(monkeypatch):
    """Which chunk keys zarr-python fetches from local stores (counted, then fetched)."""
    import zarr.storage

    seen: Counter = Counter()
    get = zarr.storage.LocalStore.get

    async def counted(self, key, *args, **kw):
        seen[key] += 1
        return await get(self, key, *args, **kw)

    monkeypatch.setattr(zarr.storage.LocalStore, "get", counted)
    return seen


@pytest.mark.parametrize("zarr_format, consolidated", STORES)
def test_store_reads_as_the_netcdf_it_came_from(tmp_path, sample_nc, zarr_format, consolidated,
                                                chunk_reads):
    store = write_store(sample_nc, tmp_path / "demo.zarr", zarr_format=zarr_format,
                        consolidated=consolidated, steps=24)
    assert (store / ".zmetadata").exists() == (zarr_format == 2 and consolidated)
    with open_series(str(store), "air_temperature") as s:
        assert s.shape == (24, 37, 49)
        chunk_reads.clear()
        # A shard's reads: blocks of 3 steps against chunks of 4 (and a frame at a time).
        got = np.concatenate([s.read(t, min(t + 3, 24)) for t in range(0, 24, 3)])
        frames = [s.read(t, t + 1)[0] for t in range(5, 9)]
        labels = s.time_axis().labels
    data = {k: n for k, n in chunk_reads.items() if k.startswith("air_temperature/")
            and not k.endswith(("zarr.json", ".zarray", ".zattrs"))}
    # Each of the 6 chunks read once by the consecutive blocks (the frames after them go
    # back to chunks 1 and 2: those two once more).
    assert len(data) == 6 and sorted(data.values()) == [1, 1, 1, 1, 2, 2], data
    with xr.open_zarr(store, decode_times=False, consolidated=consolidated) as ds:
        want = ds["air_temperature"].values
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(np.stack(frames), want[5:9])
    with open_series(str(sample_nc), "air_temperature") as nc:
        assert labels == nc.time_axis().labels[:24]


def test_store_of_several_variables_in_a_group(tmp_path, sample_nc):
    store = write_store(sample_nc, tmp_path / "g.zarr", group="atmos", steps=8)
    with open_series(str(store), "atmos/air_temperature") as s:
        assert s.shape == (8, 37, 49) and s.group == "atmos"
        assert s.spec()["variable"] == "atmos/air_temperature"
    with pytest.raises(NcreelError, match=r"g\.zarr': no group 'ocean' \(groups: atmos\)"):
        open_series(str(store), "ocean/air_temperature")
    with pytest.raises(NcreelError, match=r"no variable 'air_temperature' \(variables: none; "
                                          r"groups: atmos; name a variable in a group"):
        open_series(str(store), "air_temperature")


def test_a_directory_that_is_no_store_is_one_line_saying_so(tmp_path):
    (tmp_path / "demo.zarr").mkdir()
    with pytest.raises(NcreelError) as err:
        resolve_paths(str(tmp_path / "demo.zarr"))
    assert "a directory named like a Zarr store, but not one: it has no zarr.json" \
        in str(err.value) and "*.nc" not in str(err.value)
    (tmp_path / "runs").mkdir()
    with pytest.raises(NcreelError, match=r"runs': is a directory, neither a NetCDF file nor "
                                          r"a Zarr store .* e\.g\. input='.*runs/\*\.nc'"):
        resolve_paths(str(tmp_path / "runs"))
    with pytest.raises(NcreelError, match=r"missing\.zarr': file not found"):
        resolve_paths(str(tmp_path / "missing.zarr"))


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_a_store_with_broken_metadata_is_one_line(tmp_path, sample_nc, zarr_format):
    from ncreel.input.inputcheck import check_input_sizes

    store = write_store(sample_nc, tmp_path / "cut.zarr", zarr_format=zarr_format, steps=4)
    meta = store / "air_temperature" / ("zarr.json" if zarr_format == 3 else ".zarray")
    meta.write_text(meta.read_text()[:40])  # cut short, as an interrupted copy leaves it
    with pytest.raises(NcreelError) as err:
        check_input_sizes([str(store)])
    text = str(err.value)
    assert text.startswith(f"input '{store}': not a readable Zarr store (format "
                           f"{zarr_format}): ") and text.endswith("copy it again completely")
    assert "\n" not in text


def test_store_identity_covers_metadata_and_chunk_listing(tmp_path, sample_nc):
    store = write_store(sample_nc, tmp_path / "s.zarr", steps=8)
    recorded = input_identities([store])
    assert input_stamps([store]) == [[str(store), recorded[0]["size"],
                                      recorded[0]["mtime_ns"]]]
    check_inputs(recorded)
    # A chunk rewritten with other values (same name and size): its modification time.
    chunk = store / "air_temperature" / "c" / "0" / "0" / "0"
    data = chunk.read_bytes()
    chunk.write_bytes(data)
    with pytest.raises(NcreelError, match=r"s\.zarr' changed after this run's statistics were "
                                          r"computed \(it was modified"):
        check_inputs(recorded)
    # The store written again with two more steps (one chunk more; times are restored so
    # that only the digest tells): its metadata and chunk listing.
    recorded = input_identities([store])
    write_store(sample_nc, store, steps=10)
    for root, dirs, files in os.walk(store):
        for name in [*dirs, *files, "."]:
            os.utime(os.path.join(root, name), ns=(0, 0))
    from ncreel.input import identity

    size, _ = identity._stamp(store)
    recorded[0].update(size=size, mtime_ns=identity._stamp(store)[1])
    with pytest.raises(NcreelError, match=r"\(its header or coordinates changed\)"):
        check_inputs(recorded)


def test_corrupt_chunk_names_the_step(tmp_path, sample_nc):
    store = write_store(sample_nc, tmp_path / "bad.zarr", steps=8)
    (store / "air_temperature" / "c" / "1" / "0" / "0").write_bytes(b"not zstd data")
    with open_series(str(store), "air_temperature") as s:
        s.read(0, 4)
        with pytest.raises(NcreelError, match=r"bad\.zarr': variable 'air_temperature': cannot "
                                              r"read time step 4 "):
            s.read(2, 8)


def test_a_chunk_too_large_to_keep_is_read_again(tmp_path, sample_nc, monkeypatch):
    # A store chunked along its whole time axis: keeping the rest of the chunk would hold
    # the whole variable; above the bound nothing is kept, and the values are the same.
    from ncreel.input import chunking

    store = write_store(sample_nc, tmp_path / "long.zarr", chunk=24, steps=24)
    monkeypatch.setattr(chunking, "MAX_HELD_BYTES", 10 * 37 * 49 * 4)
    with open_series(str(store), "air_temperature") as s:
        first = s.read(0, 10)
        assert s._held == {}  # 14 steps left: above the bound
        second = s.read(10, 24)
        s.read(0, 15)
        held = s._held["air_temperature"]
        assert (held.first, held.stop) == (15, 24)  # 9 steps left: kept
    with xr.open_zarr(store, decode_times=False, consolidated=False) as ds:
        np.testing.assert_array_equal(np.concatenate([first, second]),
                                      ds["air_temperature"].values)


def test_a_stride_reads_its_steps_each_chunk_once(tmp_path, sample_nc, chunk_reads):
    # config time_every 2 over a store in chunks of 4 (every step of a chunk was returned)
    store = write_store(sample_nc, tmp_path / "s.zarr", steps=24)
    with open_series(str(store), "air_temperature", window=(1, 23, 2)) as s:
        chunk_reads.clear()
        got = np.concatenate([s.read(t, t + 1) for t in range(s.n_time)])
    data = [n for k, n in chunk_reads.items() if k.startswith("air_temperature/c/")]
    assert data == [1] * 6
    with xr.open_zarr(store, decode_times=False, consolidated=False) as ds:
        np.testing.assert_array_equal(got, ds["air_temperature"].values[1:23:2])
