"""`bench/geometry_bench.py --smoke`: the geometry writer benchmark runs, so a crash fails CI."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_geometry_bench_smoke_prints_every_key():
    proc = subprocess.run([sys.executable, str(ROOT / "bench" / "geometry_bench.py"), "--smoke"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    keys = dict(line.split("=", 1) for line in proc.stdout.splitlines() if "=" in line)
    assert int(keys["rows"]) == 180 * 360
    for key in ("rows_per_s_no_geometry", "rows_per_s_geometry_text",
                "rows_per_cpu_s_no_geometry", "rows_per_cpu_s_geometry_text"):
        assert float(keys[key]) > 0, key
    # Five corners of two numbers each, and the split column's second part.
    assert 60 < float(keys["geometry_bytes_per_row"]) < 120
