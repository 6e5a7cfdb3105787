"""`make bench-cells` at tiny sizes: every phase runs and prints its figures (a crash fails CI)."""

from __future__ import annotations

from conftest import needs_programs, run_bench


@needs_programs("initdb", "pg_ctl", "psql")
def test_bench_cells_smoke(tmp_path):
    figures = run_bench("cells_bench.py", "--smoke", "--work", str(tmp_path), timeout=600)
    for key in ("copy_writer_rows_per_s", "reduce_fraction_of_cat", "load_fraction_of_psql",
                "load_fraction_of_psql_jobs2", "copy_writer_fraction_of_polars",
                "rows_beside_frames_fraction_of_sum"):
        assert float(figures[key]) > 0, key
    # A rerun swaps the run's partition: no dead rows (the DELETE it replaced left them all).
    assert int(figures["replace_dead_tuples"]) == 0
    assert int(figures["delete_dead_tuples"]) == int(figures["replace_run_rows"]) > 0
    assert 0 < float(figures["replace_run_seconds"]) < float(figures["replace_load_seconds"])
    assert float(figures["reader_extra_wait_ms"]) >= 0
    # Phase 6 (with PostGIS): both layouts load, the normalised rerun leaves no dead rows.
    if "table_bytes_per_row_ratio" in figures:
        for key in ("table_bytes_per_row_ratio", "load_speedup_vs_wide",
                    "load_speedup_vs_wide_no_geometry", "normalised_replace_run_seconds"):
            assert float(figures[key]) > 0, key
        assert int(figures["normalised_replace_dead_tuples"]) == 0
