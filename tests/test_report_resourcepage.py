"""The resources page's flags: tight headroom always, over-declaration only when it matters."""

from __future__ import annotations

import json

import pytest
from ncreel.report.resourcepage import collect_jobs


def _job(tmp_path, name, *, mem_mb, runtime, max_rss, wall_s):
    log = tmp_path / f"{name}.log"
    (tmp_path / f"{name}.log.attempts.jsonl").write_text(
        json.dumps({"event": "start", "attempt": 1, "mem_mb": mem_mb, "runtime": runtime,
                    "threads": 1, "pid": 1}) + "\n"
        + json.dumps({"event": "end", "pid": 1, "ok": True}) + "\n")
    bench = tmp_path / f"{name}.tsv"
    bench.write_text("s\th:m:s\tmax_rss\tmax_vms\tmax_uss\tmax_pss\tio_in\tio_out\tmean_load"
                     f"\tcpu_time\n{wall_s}\t0:00:01\t{max_rss}\t1\t1\t1\t0\t0\t0\t0\n")
    return {"rule": name, "job": name, "benchmark": str(bench), "log": str(log)}


@pytest.mark.parametrize("declared, measured, flags", [
    # the demo's small jobs: 150 MB / 5 min declared, 50 MB / 2 s used -> nothing to flag
    ((150, 5), (50.0, 2.0), ""),
    # a big over-declaration: 8 GB for a 500 MB job, 12 h for 10 minutes
    ((8000, 720), (500.0, 600.0), "mem > 4x used (7500 MB unused); "
                                  "time > 4x used (710 min unused)"),
    # nearly out of memory and time
    ((1000, 10), (950.0, 580.0), "mem headroom < 10 %; time headroom < 10 %"),
])
def test_flags(tmp_path, declared, measured, flags):
    job = _job(tmp_path, "j", mem_mb=declared[0], runtime=declared[1], max_rss=measured[0],
               wall_s=measured[1])
    [row] = collect_jobs([job])
    assert row["flags"] == flags


def test_a_job_too_short_to_be_sampled_has_no_measured_memory(tmp_path):
    """Snakemake's benchmark writes max_rss 0 for a job that ended before its first
    memory sample: no headroom is computed from it (it divided by zero) and it says so."""
    job = _job(tmp_path, "j", mem_mb=150, runtime=5, max_rss=0, wall_s=0.3)
    [row] = collect_jobs([job])
    assert row["max_rss_mb"] is None and row["mem_headroom"] is None
    assert row["flags"] == "max_rss not sampled (the job ended first)"
    assert row["wall_s"] == 0.3


def test_run_numbers_from_job_rows():
    from ncreel.report.summary import run_numbers

    jobs = [
        {"rule": "statistics", "threads": 1, "wall_s": 10.0, "mem_mb": 400, "max_rss_mb": 90,
         "attempts": 1, "attempt_records": [{"start": 100.0, "end": 110.0}]},
        {"rule": "process_shard", "threads": 2, "wall_s": 60.0, "mem_mb": 700,
         "max_rss_mb": 320, "attempts": 2,
         "attempt_records": [{"start": 111.0}, {"start": 130.0, "end": 190.0}]},
        {"rule": "process_shard", "threads": 2, "wall_s": 50.0, "mem_mb": 350,
         "max_rss_mb": 300, "attempts": 1, "attempt_records": [{"start": 112.0, "end": 162.0}]},
    ]
    n = run_numbers(jobs)
    assert n["wall_s"] == 90.0  # first start to last end
    assert n["core_hours"] == pytest.approx((10 + 120 + 100) / 3600)
    assert (n["jobs"], n["retried"]) == (3, 1)
    assert (n["shard_peak_mb"], n["shard_declared_mb"]) == (320, 700)
