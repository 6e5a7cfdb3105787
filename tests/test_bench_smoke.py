"""`bench/render_bench.py --smoke`: every benchmark case runs (tiny sizes), so a crash fails CI.

One smoke run prints every key, the mesh's and the panel layout's included (``--mesh-only``
and ``--panels-only`` run the same cases alone); the tests read their keys from it.
"""

from __future__ import annotations

import pytest
from conftest import needs_programs, run_bench


@pytest.fixture(scope="module")
def smoke_keys() -> dict[str, str]:
    return run_bench("render_bench.py", "--smoke", timeout=900)


@needs_programs("ffmpeg")  # matplotlib's FFMpegWriter, one of the baselines, runs it
def test_render_bench_smoke_prints_every_key(smoke_keys):
    keys = smoke_keys
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


@needs_programs("ffmpeg")
def test_render_bench_mesh_smoke_prints_the_mesh_keys(smoke_keys):
    keys = smoke_keys
    for key in ("render_fps_mesh", "render_fps_uxarray_mesh", "mesh_speedup_vs_uxarray",
                "render_rss_mb_mesh_10", "render_rss_mb_mesh_12", "calibrated_mem_mb_mesh"):
        assert float(keys[key]) > 0, key
    assert keys["calibrated_mem_covers_peak_mesh"] == "1"


@needs_programs("ffmpeg")
def test_render_bench_panels_smoke_prints_the_panel_keys(smoke_keys):
    keys = smoke_keys
    for key in ("render_fps_panels_2x2", "render_fps_xmovie_panels_2x2",
                "panels_speedup_vs_xmovie", "render_rss_mb_panels_2x2"):
        assert float(keys[key]) > 0, key
