"""``ncreel inspect``: the pre-flight report, from the workflow's own detection code."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from grid_files import write_rotated_pole
from PIL import Image


def _inspect(*args):
    return subprocess.run([sys.executable, "-m", "ncreel", "inspect", *map(str, args)],
                          capture_output=True, text=True, timeout=300)


def test_demo_sample(sample_nc, tmp_path):
    png = tmp_path / "p.png"
    proc = _inspect(sample_nc, "air_temperature", "--preview", png)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout.splitlines()
    assert "grid: rectilinear, 37 x 49" in out
    assert "latitude/longitude: the file's 'latitude'/'longitude' (1-D)" in out
    assert any(ln.startswith("time: 'time' along 'time', 240 steps, calendar 360_day")
               for ln in out)
    assert "frames: first '1860', last '2099'" in out  # annual means
    assert ("cells: 1,813; steps: 240; at most 435,120 rows (one per cell and step that is "
            "not missing)") in out
    # The estimate from the middle step against the demo's real COPY file (37.8 MB).
    mb = float(next(ln for ln in out if ln.startswith("COPY file")).split("about ")[1]
               .split(" MB")[0])
    assert 30 < mb < 40
    with Image.open(png) as im:
        assert im.size == (960, 540)
    assert out[-1] == "note: detection was sure of everything above"


def test_the_example_on_the_running_page_is_what_inspect_prints(sample_nc, tmp_path):
    """docs/running.md shows `ncreel inspect` on the demo input: the same lines, run from a
    directory holding resources/A1B_north_america.nc as the page does."""
    page = (Path(__file__).resolve().parents[1] / "docs" / "running.md").read_text()
    block = page.split("$ ncreel inspect resources/A1B_north_america.nc air_temperature\n")[1]
    shown = block.split("\n```")[0].splitlines()
    (tmp_path / "resources").mkdir()
    shutil.copy(sample_nc, tmp_path / "resources" / "A1B_north_america.nc")
    proc = subprocess.run([sys.executable, "-m", "ncreel", "inspect",
                           "resources/A1B_north_america.nc", "air_temperature"],
                          capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == shown


def test_without_a_variable_lists_them(sample_nc):
    proc = _inspect(sample_nc)
    assert proc.returncode == 0
    assert "  air_temperature (time=240, latitude=37, longitude=49)  air_temperature" in \
        proc.stdout.splitlines()


def test_rotated_pole_says_where_latitude_longitude_come_from(tmp_path):
    path, _ = write_rotated_pole(tmp_path / "cordex.nc")
    proc = _inspect(path, "tas", "--no-preview")
    assert proc.returncode == 0, proc.stderr
    assert ("grid: projected, CF grid mapping 'rotated_pole' (rotated_latitude_longitude); "
            "x/y coordinates 'rlon'/'rlat'") in proc.stdout
    assert "latitude/longitude: computed from the grid mapping (pyproj)" in proc.stdout


def test_mesh(tmp_path):
    pytest.importorskip("uxarray")
    from meshes import voronoi_mesh, write_mpas

    write_mpas(tmp_path / "mpas.nc", voronoi_mesh(200))
    proc = _inspect(tmp_path / "mpas.nc", "temperature", "--no-preview")
    assert proc.returncode == 0, proc.stderr
    assert "grid: unstructured mesh (MPAS), 200 faces along 'nCells'" in proc.stdout


def test_what_the_workflow_would_refuse_is_one_line(tmp_path, eofs_data):
    proc = _inspect(eofs_data / "hgt_djf.nc", "z", "--no-preview")
    assert proc.returncode == 2 and proc.stdout == ""
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("ncreel: error:") and "select" in lines[0]
    ok = _inspect(eofs_data / "hgt_djf.nc", "z", "--select", "pressure=0", "--no-preview")
    assert ok.returncode == 0, ok.stderr
    assert "select: pressure=0" in ok.stdout


def test_times_out_of_order_are_said_and_an_undecidable_order_refused(tmp_path):
    from layouts import write_rectilinear

    path, _ = write_rectilinear(tmp_path / "m.nc", n_time=4, time_values=[0.0, 2.0, 1.0, 3.0])
    proc = _inspect(path, "tas", "--no-preview")
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout.splitlines()
    assert f"time order: NOT as stored: '{path}' holds its times out of order (1 step(s) " \
        "earlier than the one before, first 2000-01-02T00:00:00 after " \
        "2000-01-03T00:00:00): steps read in time order" in out
    assert "frames: first '2000-01-01', last '2000-01-04'" in out
    assert "note: detection was sure of everything above" not in out
    path, _ = write_rectilinear(tmp_path / "gap.nc", n_time=4,
                                time_values=[0.0, 2.0, np.nan, 1.0])
    proc = _inspect(path, "tas", "--no-preview")
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1 and "where those go cannot be decided" \
        in lines[0]


def test_chunking_and_a_file_chunked_along_its_whole_time_axis(tmp_path, monkeypatch):
    """The variable's chunks and what one costs; a file in one chunk along its whole time
    axis, larger than a run holds, gets one line naming it and saying what to do (the
    advice followed with cdo, where installed, leaves one step per chunk)."""
    from ncreel.input import chunking
    from ncreel.jobs.preflight import inspect
    from test_input_chunks import write_chunked

    day = write_chunked(tmp_path / "day.nc", 22)
    lines = inspect(str(day), "tas")
    assert ("chunks: (4, 6, 8) along (time, lat, lon), zlib; one chunk is 0.8 kB decoded, "
            "4 steps: each chunk is decompressed once, its steps not yet read held for the "
            "next reads (at most 0.6 kB)") in lines
    assert not any(ln.startswith("chunks: warning") for ln in lines)
    long = write_chunked(tmp_path / "long.nc", 24, chunk=24)
    monkeypatch.setattr(chunking, "MAX_HELD_BYTES", 10 * 6 * 8 * 4)
    lines = inspect(str(long), "tas")
    assert [ln for ln in lines if ln.startswith("chunks: ")] == [
        "chunks: (24, 6, 8) along (time, lat, lon), zlib; one chunk is 4.6 kB decoded",
        f"chunks: warning: '{long}' holds 'tas' in one chunk along its whole time axis (24 "
        "steps), 4.6 kB decoded, more than the 1.9 kB a run holds: each step read "
        "decompresses the whole series again; rewrite it with one step per chunk: nccopy -c "
        f"time/1,lat/6,lon/8 {long} long_steps.nc (or cdo -f nc4 -z zip -k grid copy, or "
        "xarray's to_netcdf with encoding chunksizes of one step)"]
    if shutil.which("cdo"):
        fixed = tmp_path / "long_steps.nc"
        subprocess.run(["cdo", "-s", "-f", "nc4", "-z", "zip", "-k", "grid", "copy",
                        str(long), str(fixed)], check=True, capture_output=True)
        chunks = [ln for ln in inspect(str(fixed), "tas") if ln.startswith("chunks: ")]
        assert chunks == ["chunks: (1, 6, 8) along (time, lat, lon), zlib; one chunk is "
                          "0.2 kB decoded, one step"]
    lines = inspect(str(write_chunked(tmp_path / "c.nc", 5, chunk=None)), "tas")
    assert "chunks: contiguous (not chunked): each step is read alone" in lines
