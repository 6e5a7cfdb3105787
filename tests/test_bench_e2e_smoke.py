"""`make bench-e2e` on a tiny grid: every case runs the workflow and prints its figures."""

from __future__ import annotations

from conftest import run_bench


def test_bench_e2e_smoke(tmp_path):
    figures = run_bench("e2e_bench.py", "--smoke", "--work", str(tmp_path))
    for key in ("e2e_movie_only_vs_encode_floor", "e2e_day_chunks_vs_step_chunks",
                "e2e_both_vs_polars_1thread", "copy_writer_fraction_of_polars",
                "encode_floor_seconds", "polars_write_seconds"):
        assert float(figures[key]) > 0, key
    # 6 steps of 19 x 36 cells, every cell a row (the field model).
    assert int(figures["rows"]) == 6 * 19 * 36
