"""`bench/render_bench.py --smoke`: every benchmark case runs (tiny sizes), so a crash fails CI."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from conftest import needs_programs, run_bench

ROOT = Path(__file__).resolve().parents[1]


@needs_programs("ffmpeg")  # matplotlib's FFMpegWriter, one of the baselines, runs it
def test_render_bench_smoke_prints_every_key():
    keys = run_bench("render_bench.py", "--smoke", timeout=900)
    for key in ("render_fps_ncreel", "render_speedup_vs_xmovie", "render_fps_0p25deg",
                "render_fps_0p25deg_robinson", "render_fps_curvilinear",
                "render_fps_rotated_pole",
                "render_speedup_vs_xmovie_0p25deg", "calibrated_mem_mb_0p25deg",
                "render_fps_panels_2x2", "panels_speedup_vs_xmovie",
                "exact_share_differing_0p25deg", "exact_share_beyond_level_interior_demo"):
        assert float(keys[key]) >= 0, key
    # The index path matches a full pcolormesh draw away from cell edges, at any size.
    for grid in ("demo", "0p25deg", "0p25deg_robinson", "curvilinear", "rotated_pole"):
        assert float(keys[f"exact_share_beyond_level_interior_{grid}"]) == 0
    assert keys["calibrated_mem_covers_peak_0p25deg"] == "1"


def test_render_bench_mesh_smoke_prints_the_mesh_keys():
    proc = subprocess.run([sys.executable, str(ROOT / "bench" / "render_bench.py"), "--smoke",
                           "--mesh-only"], capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    keys = dict(line.split("=", 1) for line in proc.stdout.splitlines()
                if "=" in line and not line.startswith("#"))
    for key in ("render_fps_mesh", "render_fps_uxarray_mesh", "mesh_speedup_vs_uxarray",
                "render_rss_mb_mesh_10", "render_rss_mb_mesh_12", "calibrated_mem_mb_mesh"):
        assert float(keys[key]) > 0, key
    assert keys["calibrated_mem_covers_peak_mesh"] == "1"


def test_render_bench_panels_smoke_prints_the_panel_keys():
    proc = subprocess.run([sys.executable, str(ROOT / "bench" / "render_bench.py"), "--smoke",
                           "--panels-only"], capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    keys = dict(line.split("=", 1) for line in proc.stdout.splitlines()
                if "=" in line and not line.startswith("#"))
    for key in ("render_fps_panels_2x2", "render_fps_xmovie_panels_2x2",
                "panels_speedup_vs_xmovie", "render_rss_mb_panels_2x2"):
        assert float(keys[key]) > 0, key
