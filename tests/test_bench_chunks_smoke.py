"""`bench/chunks_bench.py --smoke`: every pass runs on both chunkings (tiny sizes)."""

from __future__ import annotations

from conftest import run_bench


def test_chunks_bench_smoke_prints_every_key():
    keys = run_bench("chunks_bench.py", "--smoke", timeout=600)
    for name in ("frames", "rows", "stats"):
        for what in ("s_step_chunks", "s_day_chunks", "s_day_chunks_unheld",
                     "day_vs_step_chunks", "day_unheld_vs_step_chunks"):
            assert float(keys[f"read_{name}_{what}"]) >= 0, (name, what)
    # 3 steps of a 4-step chunk of 31 x 60 float32
    assert float(keys["held_chunk_mb_day_chunks"]) == round(3 * 31 * 60 * 4 / 2**20, 3)
