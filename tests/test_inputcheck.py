"""Truncated NetCDF-3 inputs and series too big for memory stop before any job, in one line."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import netCDF4
import numpy as np
import pytest
import xarray as xr
from ncreel.core.errors import NcreelError
from ncreel.input.inputcheck import MAX_TIME_STEPS, check_input_sizes, netcdf3_size
from workflow_run import make_workdir

FORMATS = ["NETCDF3_CLASSIC", "NETCDF3_64BIT_OFFSET", "NETCDF3_64BIT_DATA"]


def _write(path: Path, fmt: str, *, n_time=5, ny=3, nx=4, record=True, extra=True) -> Path:
    """A (time, lat, lon) 'tas' with coordinates, and optionally more record variables."""
    with netCDF4.Dataset(path, "w", format=fmt) as ds:
        ds.set_fill_off()
        ds.createDimension("time", None if record else n_time)
        ds.createDimension("lat", ny)
        ds.createDimension("lon", nx)
        ds.title = "ncreel test"
        t = ds.createVariable("time", "f8", ("time",))
        t.units = "days since 2000-01-01"
        lat = ds.createVariable("lat", "f4", ("lat",))
        lat.units = "degrees_north"
        lon = ds.createVariable("lon", "f4", ("lon",))
        lon.units = "degrees_east"
        lat[:], lon[:] = np.arange(ny), np.arange(nx)
        v = ds.createVariable("tas", "f4", ("time", "lat", "lon"))
        v[:n_time] = np.arange(n_time * ny * nx, dtype=np.float32).reshape(n_time, ny, nx) + 1
        if extra:
            ds.createVariable("flag", "i1", ("time", "lat"))[:n_time] = 1
        t[:n_time] = np.arange(n_time)
    return path


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("record, extra", [(True, True), (True, False), (False, True)])
def test_header_size_matches_libnetcdf(fmt, record, extra, tmp_path):
    path = _write(tmp_path / "a.nc", fmt, record=record, extra=extra)
    size = netcdf3_size(path)
    # libnetcdf pads the last variable to 4 bytes; the declared data ends at most 3 before.
    assert 0 <= size.actual - size.expected <= 3
    cut = tmp_path / "cut.nc"
    cut.write_bytes(path.read_bytes()[:size.expected - 1])
    with pytest.raises(NcreelError, match=f"cut.nc'.*declares {size.expected} bytes.*has "
                                          f"{size.expected - 1}"):
        check_input_sizes([path, cut])


def test_netcdf4_and_streaming_are_not_netcdf3(tmp_path):
    assert netcdf3_size(_write(tmp_path / "a.nc", "NETCDF4")) is None
    path = _write(tmp_path / "s.nc", "NETCDF3_CLASSIC")
    with open(path, "r+b") as fh:  # numrecs = STREAMING: size unknown by design
        fh.seek(4)
        fh.write(b"\xff\xff\xff\xff")
    assert netcdf3_size(path) is None


def _workdir(tmp_path: Path) -> Path:
    (tmp_path / "work").mkdir()
    return make_workdir(tmp_path / "work")


_PEAK = ("import resource, subprocess, sys; p = subprocess.run(sys.argv[1:]); "
         "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, file=sys.stderr); "
         "sys.exit(p.returncode)")


def _dry_run(work: Path, *config: str) -> tuple[subprocess.CompletedProcess, int]:
    """`snakemake -n` and its peak RSS (MiB), measured by a wrapper process of its own."""
    proc = subprocess.run([sys.executable, "-c", _PEAK, sys.executable, "-m", "snakemake",
                           "--cores", "1", "-n", "--config", *config], cwd=work,
                          capture_output=True, text=True)
    return proc, int(proc.stderr.split()[-1]) // 1024


def _error_line(proc) -> str:
    lines = [ln for ln in proc.stderr.splitlines() if ln.startswith("ncreel: error:")]
    assert proc.returncode != 0 and len(lines) == 1, proc.stderr[-3000:]
    return lines[0]


def test_truncated_netcdf3_sample_is_refused(tmp_path, sample_nc):
    """The issue's case: the demo as NETCDF3_64BIT_OFFSET, cut in half."""
    work = _workdir(tmp_path)
    nc3 = work / "demo3.nc"
    with xr.open_dataset(sample_nc, decode_times=False) as ds:
        ds.isel(time=slice(0, 24)).to_netcdf(nc3, format="NETCDF3_64BIT")
    full = nc3.stat().st_size
    os.truncate(nc3, full // 2)
    line = _error_line(_dry_run(work, f"input={nc3.name}")[0])
    assert f"input '{nc3.name}': file is truncated" in line
    assert str(full // 2) in line and str(netcdf3_size(nc3).expected) in line
    assert not (work / "results").exists()


def _declare(path: Path, *, numrecs: int | None = None) -> Path:
    """Give a NetCDF-3 file a huge declared size cheaply: patch numrecs, extend sparsely."""
    if numrecs is not None:
        with open(path, "r+b") as fh:
            cdf5 = fh.read(4)[3] == 5  # CDF-5 stores numrecs in 8 bytes, the others in 4
            fh.write(numrecs.to_bytes(8 if cdf5 else 4, "big"))
    os.truncate(path, netcdf3_size(path).expected)  # a sparse file: no disk blocks
    return path


def test_huge_time_axis_is_refused_from_the_header(tmp_path):
    work = _workdir(tmp_path)
    path = _declare(_write(work / "long.nc", "NETCDF3_64BIT_OFFSET", ny=2, nx=2, extra=False),
                    numrecs=50_000_000)
    proc, peak_mb = _dry_run(work, f"input={path.name}", "variable=tas")
    line = _error_line(proc)
    assert f"has 50000000 time steps, more than ncreel's limit of {MAX_TIME_STEPS}" in line
    assert peak_mb < 400, peak_mb  # opening the series would read 400 MB of time values


def test_grid_beyond_the_memory_cap_is_refused(tmp_path):
    """100 000 x 100 000 cells: statistics needs ~500 GB, the default profile caps 16 000 MB."""
    work = _workdir(tmp_path)
    path = work / "wide.nc"
    with netCDF4.Dataset(path, "w", format="NETCDF3_64BIT_DATA") as ds:
        ds.set_fill_off()
        ds.createDimension("time", None)
        ds.createDimension("lat", 100_000)
        ds.createDimension("lon", 100_000)
        ds.createVariable("time", "f8", ("time",)).units = "days since 2000-01-01"
        ds.createVariable("tas", "f4", ("time", "lat", "lon"))
    _declare(path, numrecs=1)
    proc, _ = _dry_run(work, f"input={path.name}", "variable=tas")
    line = _error_line(proc)
    assert "100000 x 100000 grid: the statistics job needs about" in line
    assert "more than the mem_mb limit of 16000" in line


def test_corrupt_chunk_names_file_and_variable(tmp_path):
    """A damaged zlib chunk: netCDF4 raises a bare 'NetCDF: HDF error'; the job names both."""
    import zlib

    work = _workdir(tmp_path)
    data = np.arange(4 * 6 * 8, dtype=np.float32).reshape(4, 6, 8) * 1.5
    path = work / "chunked.nc"
    with netCDF4.Dataset(path, "w") as ds:
        ds.createDimension("time", None)
        ds.createDimension("lat", 6)
        ds.createDimension("lon", 8)
        t = ds.createVariable("time", "f8", ("time",))
        t.units, t[:] = "days since 2000-01-01", np.arange(4)
        ds.createVariable("tas", "f4", ("time", "lat", "lon"), zlib=True, complevel=1,
                          shuffle=False, chunksizes=(1, 6, 8))[:] = data
    raw = bytearray(path.read_bytes())
    chunk = zlib.compress(data[2].tobytes(), 1)  # HDF5's deflate filter is zlib's compress2
    at = raw.find(chunk) + len(chunk) // 2
    assert at > len(chunk) // 2, "the chunk's bytes were not found"
    raw[at:at + 8] = bytes(8)
    path.write_bytes(bytes(raw))
    proc = subprocess.run([sys.executable, "-m", "snakemake", "--cores", "1",
                           "results/bad/stats.json", "--config", f"input={path.name}",
                           "variable=tas", "run=bad"], cwd=work, capture_output=True, text=True)
    assert proc.returncode != 0
    log = (work / "logs/bad/statistics.log").read_text()
    # The exact step whose chunk is corrupt, not the block the read asked for.
    assert "input 'chunked.nc': variable 'tas': cannot read time step 2 " in log, log
    assert "HDF error" in log and not (work / "results/bad/stats.json").exists()
