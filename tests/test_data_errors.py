"""Failures more memory cannot fix: a corrupt compressed chunk names its exact time step,
a full disk under ffmpeg is ``disk``; neither attempt is retried with more memory."""

from __future__ import annotations

import os
import subprocess
import zlib
from pathlib import Path

import netCDF4
import numpy as np
import pytest
from ncreel.core.errors import DiskFull, NcreelError
from ncreel.input.source import open_series
from ncreel.run.jobrecord import failure_reason
from ncreel.run.resources import memory_attempt

N_TIME, NY, NX, BAD = 24, 6, 8, 12


def _chunked(path: Path) -> np.ndarray:
    """``tas(time, lat, lon)`` in NetCDF-4, one zlib-compressed chunk per step."""
    data = (250 + np.random.default_rng(1).random((N_TIME, NY, NX)) * 30).astype("f4")
    with netCDF4.Dataset(path, "w") as ds:
        ds.createDimension("time", None)
        ds.createDimension("lat", NY)
        ds.createDimension("lon", NX)
        t = ds.createVariable("time", "f8", ("time",))
        t.units, t.calendar, t.axis = "days since 2000-01-01", "standard", "T"
        la = ds.createVariable("lat", "f4", ("lat",))
        la.units, la[:] = "degrees_north", np.arange(NY) * 10.0
        lo = ds.createVariable("lon", "f4", ("lon",))
        lo.units, lo[:] = "degrees_east", np.arange(NX) * 10.0
        v = ds.createVariable("tas", "f4", ("time", "lat", "lon"), zlib=True, complevel=4,
                              shuffle=False, chunksizes=(1, NY, NX))
        v.units, v[:], t[:] = "K", data, np.arange(N_TIME)
    return data


def _corrupt_step(path: Path, data: np.ndarray, step: int) -> Path:
    """Overwrite the middle of the compressed chunk of `step` (found by inflating every
    zlib stream of the file and comparing it with the step's values)."""
    raw = bytearray(path.read_bytes())
    want = data[step].astype("<f4").tobytes()
    for at in (i for i, b in enumerate(raw) if b == 0x78):
        try:
            if zlib.decompressobj().decompress(bytes(raw[at:at + 4096])) == want:
                break
        except zlib.error:
            continue
    else:
        raise AssertionError("chunk not found")
    for k in range(at + 30, at + 60):
        raw[k] ^= 0x5A
    bad = path.with_name("corrupt.nc")
    bad.write_bytes(bytes(raw))
    return bad


def test_corrupt_chunk_names_its_step_and_is_a_data_error(tmp_path):
    """Reading all 24 steps names step 12 (was '0..23'), with the file and the variable;
    the job records reason ``data`` and its retry keeps the first attempt's memory."""
    good = tmp_path / "good.nc"
    bad = _corrupt_step(good, _chunked(good), BAD)
    said = (f"input '{bad}': variable 'tas': cannot read time step {BAD} (NetCDF: HDF error);"
            " the file is corrupt there: replace it with a good copy")
    with open_series(str(bad), "tas") as series:
        assert series.read(0, BAD).shape == (BAD, NY, NX)  # the steps before it are fine
        assert series.read(BAD + 1, N_TIME).shape == (N_TIME - BAD - 1, NY, NX)
        with pytest.raises(NcreelError) as err:
            series.read(0, N_TIME)
        assert str(err.value) == said
        with pytest.raises(NcreelError) as err:  # blockwise, as the statistics job reads
            list(series.iter_blocks(0, N_TIME, max_bytes=NY * NX * 8 * 5))
        assert str(err.value) == said
        with pytest.raises(NcreelError, match=f"variable 'tas': cannot read time step {BAD} "):
            series.read_variable("tas", 0, N_TIME)  # a cell model's second variable
    assert failure_reason(err.value) == "data"
    failed = [{"attempt": 1, "status": "failed", "reason": "data"}]
    assert memory_attempt(failed, 2) == 1  # Snakemake's attempt 2: the memory of attempt 1


def test_corrupt_chunk_in_a_later_file_names_the_series_step(tmp_path):
    """Two files: step 12 of the second file is step 36 of the series; both are said."""
    first = tmp_path / "a.nc"
    _chunked(first)
    second = tmp_path / "b.nc"
    data = _chunked(second)
    with netCDF4.Dataset(second, "a") as ds:
        ds["time"][:] = np.arange(N_TIME) + N_TIME
    bad = _corrupt_step(second, data, BAD)
    with open_series([str(first), str(bad)], "tas") as series, \
            pytest.raises(NcreelError, match=f"'{bad}': variable 'tas': cannot read time step "
                          f"{N_TIME + BAD} \\(step {BAD} of this file\\)"):
        series.read(0, 2 * N_TIME)


@pytest.mark.skipif(os.geteuid() != 0, reason="mounts a small tmpfs (a full disk), which "
                    "needs root")
def test_full_disk_in_concat_segments_is_disk_not_memory(tmp_path):
    """ffmpeg joining segments onto a full file system: DiskFull, reason ``disk``, no more
    memory on the retry (was 'ffmpeg failed', counted as an error that memory might fix)."""
    from ncreel.render.movie import SegmentEncoder, concat_segments
    from render_data import H, W, fields, renderer

    r = renderer((6, 8), blit=True)
    segments = []
    for k, (a, b) in enumerate([(0, 20), (20, 40)]):
        seg = tmp_path / f"seg{k}.mp4"
        with SegmentEncoder(seg, width=W, height=H, fps=12, crf=0,
                            preset="ultrafast") as enc:
            for i, field in enumerate(fields(b - a, (6, 8))):
                enc.write(r.draw(field, str(a + i)))
        segments.append(seg)
    assert sum(s.stat().st_size for s in segments) > 8192
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8k", "tmpfs", str(mnt)], check=True)
    try:
        with pytest.raises(DiskFull) as err:
            concat_segments(segments, mnt / "movie.mp4")
    finally:
        subprocess.run(["umount", str(mnt)], check=True)
    assert str(err.value).startswith(f"ffmpeg could not finish joining 2 segments into "
                                     f"{mnt / 'movie.mp4'}: no space left on device")
    assert failure_reason(err.value) == "disk"
    assert memory_attempt([{"attempt": 1, "status": "failed", "reason": "disk"}], 2) == 1
