"""Declared resources: a mem_mb above the cap that will run the job is said, not hidden."""

from __future__ import annotations

import inspect
import re
import shutil

import pytest
from conftest import ROOT
from ncreel.input import source
from ncreel.jobs import stats
from ncreel.run import resources
from ncreel.run.resources import (
    SCHEDULER_JOB_OVERHEAD_MB,
    job_overhead_mb,
    said_over_cap,
    with_job_overhead,
    with_overhead,
)
from workflow_run import make_workdir, snakemake


def test_said_over_cap_keeps_value_and_signature(capsys):
    def mem(wildcards, input, threads, attempt):
        return 1000 * attempt

    wrapped = said_over_cap("rule_x", mem, lambda: 1500)
    # Snakemake passes only the arguments a resource function names.
    assert list(inspect.signature(wrapped).parameters) == ["wildcards", "input", "threads",
                                                           "attempt"]
    assert wrapped(None, None, 1, 1) == 1000 and capsys.readouterr().err == ""
    assert wrapped(None, None, 1, 2) == 2000
    err = capsys.readouterr().err.splitlines()
    assert err == [ln for ln in err if ln.startswith("ncreel: warning: rule_x declares "
                                                     "mem_mb=2000, above the mem_mb limit 1500")]
    assert len(err) == 1
    assert wrapped(None, None, 1, 3) == 3000 and capsys.readouterr().err == ""  # once a rule
    assert said_over_cap("rule_y", mem, lambda: None)(None, None, 1, 9) == 9000


@pytest.mark.integration
def test_rule_asking_above_the_cap_is_said_before_it_runs(tmp_path, sample_nc):
    work = make_workdir(tmp_path)
    (work / "resources").mkdir()
    shutil.copy(sample_nc, work / "resources" / "A1B_north_america.nc")
    # calibrate_render declares 2000 MB; a 1000 MB cap lowers it without a word from Snakemake.
    proc = snakemake(work, "-n", "--resources", "mem_mb=1000")
    said = [ln for ln in proc.stderr.splitlines() if ln.startswith("ncreel: warning:")]
    assert any("calibrate_render declares mem_mb=2000, above the mem_mb limit 1000" in ln
               for ln in said), proc.stderr[-3000:]


RULES = sorted((ROOT / "workflow/rules").glob("*.smk"))


def test_every_rule_takes_mem_mb_and_runtime_from_resources_py():
    """No rule writes a number: mem_mb goes through rule_mem_mb (ncreel.run.resources plus the
    per-job overhead), runtime through rule_runtime or a ncreel.run.resources function."""
    found = {"mem_mb": 0, "runtime": 0}
    for path in RULES:
        for n, line in enumerate(path.read_text().splitlines(), 1):
            m = re.match(r"\s+(mem_mb|mem_mib|mem|runtime)\s*=\s*(.*)$", line)
            if not m:
                continue
            key, value = m.groups()
            found[key] = found.get(key, 0) + 1
            ok = value.startswith("rule_mem_mb(") if key == "mem_mb" else (
                value.startswith("rule_runtime(") or re.match(r"lambda [^:]*: res\.\w+\(", value))
            assert ok, f"{path.name}:{n}: {key} not from ncreel.run.resources: {line.strip()}"
    assert found["mem_mb"] == found["runtime"] >= 9


def test_job_overhead_added_only_for_separate_jobs():
    def mem(wildcards, input, threads, attempt):
        return 100 * attempt

    remote = []
    wrapped = with_job_overhead(mem, lambda: bool(remote))
    assert list(inspect.signature(wrapped).parameters) == ["wildcards", "input", "threads",
                                                           "attempt"]
    assert wrapped(None, None, 1, 2) == 200
    remote.append(True)  # asked at each call: the scheduler job re-evaluates resources
    # The rule's share is at least the job's Snakemake: a command it starts counts as a
    # second copy of it until the command's program runs (350 MB: 700, not 550).
    assert wrapped(None, None, 1, 2) == 2 * SCHEDULER_JOB_OVERHEAD_MB == 700
    assert wrapped(None, None, 1, 5) == 500 + SCHEDULER_JOB_OVERHEAD_MB
    assert job_overhead_mb(False) == 0
    assert with_overhead(120.5, 0) == 120.5


def test_no_overhead_added_where_the_pbs_pro_executor_adds_it():
    """pbs-pro asks PBS for mem_mb plus its own overhead: ncreel adds nothing in the run's
    main process (executor name) nor inside its jobs (the variable it sets); Slurm,
    cluster-generic and local runs are not such executors."""
    assert resources.executor_adds_overhead("pbs-pro", environ={})
    assert resources.executor_adds_overhead(
        None, environ={resources.PBS_PRO_JOB_OVERHEAD_ENV: "200"})
    for name in ("slurm", "cluster-generic", "local", None):
        assert not resources.executor_adds_overhead(name, environ={})


def test_memory_model_uses_the_block_sizes_it_models():
    src = (ROOT / "workflow/ncreel/run/resources.py").read_text()
    assert not re.search(r"1_000_000|\d\s*\*\s*2\s*\*\*\s*20", src), "copy of a block size"
    sig = inspect.signature(resources._rows_mb).parameters
    assert sig["max_block_cells"].default is source.MAX_BLOCK_CELLS
    assert inspect.signature(resources.statistics_mem_mb).parameters[
        "max_block_bytes"].default is source.BLOCK_BYTES
    assert inspect.signature(stats.series_statistics).parameters[
        "max_block_bytes"].default is source.BLOCK_BYTES
    # the statistics job's value counts, as counted
    assert resources.VALUE_COUNTS_MB == (2 * stats.KEY_BINS_MAX + stats.KEY_SLICE) * 8 / 1e6


def test_rows_beside_the_frames_count_both_passes_at_once():
    """One worker and both outputs: the rows are written while the frames render, so the
    job holds the worker's peak, its encoder, the rows pass and the queued blocks at once
    (the sum); without overlap, or with several workers, the larger pass as before."""
    from ncreel.config.settings import Calibration
    from ncreel.jobs.shard import QUEUED_BLOCKS
    from ncreel.render.segment import RENDER_BLOCK_BYTES

    cal = Calibration(width=1920, height=1080, dpi=200.0, preset="medium", crf=23,
                      probe_frames=64, base_mb=250.0, worker_peak_mb=600.0,
                      encoder_peak_mb=400.0, encoder_cpu_s_per_frame=0.1, startup_s=2.0,
                      seconds_per_frame=0.2, render_s_per_frame=0.1, target_minutes=10.0,
                      frames_per_shard=48, workers=1)
    ny, nx = 721, 1440  # 0.25 degree: a step (1 038 240 values) is a rows block
    rows = resources._rows_mb(ny=ny, nx=nx, n_frames=48, n_columns=9)
    assert round(rows, 1) == 181.2  # 15 bytes a value and column + 48 a cell, one step
    shared = resources.shared_blocks_mb(ny=ny, nx=nx)
    assert shared == 3 * ny * nx * 8 / 2**20  # 23.8 MiB
    assert resources.SHARED_BLOCKS == QUEUED_BLOCKS + 1
    assert RENDER_BLOCK_BYTES <= source.MAX_BLOCK_CELLS * 8  # the bound holds

    def mem(**kw):
        return resources.render_mem_mb_calibrated(cal, ny=ny, nx=nx, n_frames=48,
                                                  n_columns=9, **kw)

    assert resources.ROWS_PASS_MB == 90
    assert mem(overlap=True) == 1560  # (600 + 400 + 181.2 + 90 + 23.8) * 1.2 = 1553.9
    assert mem() == 1200  # the larger: (600 + 400) * 1.2, not 600 + 181.2 + 90 + 60
    assert mem(overlap=True, workers=2) == mem(workers=2)  # rows after the frames
    assert mem(overlap=True, attempt=2) == 2 * 1560


def test_jobs_count_the_time_chunk_their_series_hold():
    """An ERA5-like file in day chunks (24, 721, 1440) of float32: a read holds at most 23
    steps of a chunk, 23 * 721 * 1440 * 4 = 95,523,840 bytes (91.1 MiB)."""
    from ncreel.config.settings import Calibration

    chunk_mb = 23 * 721 * 1440 * 4 / 2**20
    cal = Calibration(width=1280, height=720, dpi=100, preset="medium", crf=18,
                      probe_frames=64, base_mb=300.0, worker_peak_mb=900.0,
                      encoder_peak_mb=100.0, encoder_cpu_s_per_frame=0.01, startup_s=2.0,
                      seconds_per_frame=0.05, render_s_per_frame=0.03, target_minutes=10,
                      frames_per_shard=48, workers=1)
    kw = dict(ny=721, nx=1440, n_frames=48)
    # The rows pass: worker 900 + rows (1,038,240 cells * (15 * 8 + 48) bytes = 166.3 MiB)
    # + its libraries 90 + identity check 60 = 1216.3 above the render pass's 1000; times
    # 1.2, up to 10 MB.
    assert resources.render_mem_mb_calibrated(cal, **kw) == 1460
    # ... plus the table's chunk: (1216.3 + 91.1) * 1.2 = 1568.9
    assert resources.render_mem_mb_calibrated(cal, **kw, chunk_mb=chunk_mb) == 1570
    # Statistics: 250 + (3 blocks of 64 MiB + 40 bytes a cell) / 1e6 + the value counts
    # 167.8 = 660.6 MB, times 1.5 up to 50 MB; the chunk counts twice (held, and raw while
    # decoded): + 191.0 MB.
    assert resources.statistics_mem_mb(ny=721, nx=1440) == 1000
    # statistics_processes: each worker holds one process's, the job's own the merge
    assert resources.statistics_mem_mb(ny=721, nx=1440, workers=2) == 2700  # 1065 MB used
    assert resources.statistics_mem_mb(ny=721, nx=1440, chunk_mb=chunk_mb) == 1300
    assert resources.calibrate_mem_mb() == 2000
    assert resources.calibrate_mem_mb(chunk_mb=chunk_mb, attempt=2) == 2 * 2200
