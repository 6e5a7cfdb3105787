"""A full disk is one kind, whichever writer meets it: recorded ``disk``, said in one line.

Every writer a job uses is driven onto a real full file system (a small tmpfs, so these
tests need root, as CI runs them): the COPY writer (polars, whose Rust I/O error carries
no errno), its gzip and zstd streams, the reduce join, numpy, JSON, Pillow's PNG,
matplotlib's report figures, the HTML pages and the job's log itself. Each error must be
classified ``disk`` (polars' was ``error``, retried as if memory might help) and a job
that meets one must end with one ``ncreel: error:`` line, no traceback, its attempts
record saying ``disk``, and no retry.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from conftest import ROOT, fill_disk
from ncreel.core.errors import DiskFull, disk_full, disk_full_line
from ncreel.run.jobrecord import failure_reason, read_attempts, retry_verdict

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="mounts a small tmpfs (a full "
                                "disk), which needs root (CI runs it as root)")


@pytest.fixture
def full_dir(tmp_path):
    """A directory on a file system with no space left."""
    mnt = tmp_path / "full"
    mnt.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mnt)], check=True)
    try:
        fill_disk(mnt, "filler")
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=True)


def _rows(n=50_000):
    return {"time_index": np.zeros(n, np.int32), "value": np.arange(n, dtype=np.float64)}


def _copy(path, compression):
    # As a shard job writes its COPY file: under a temporary name, renamed when whole.
    from ncreel.core.io import atomic_path
    from ncreel.pg.copytext import open_copy_writer, write_copy_rows

    with atomic_path(path) as tmp, open_copy_writer(tmp, compression) as fh:
        write_copy_rows(fh, _rows())


def _reduce(path):
    from ncreel.pg.copytext import concatenate

    src = path.parent.parent / "shard.copy"
    src.write_bytes(b"0\t1\n" * 100_000)
    concatenate([src], path)


def _npy(path):
    from ncreel.core.io import atomic_path

    with atomic_path(path) as tmp, open(tmp, "wb") as fh:
        np.save(fh, np.zeros((300, 300)))


def _calibration(path):
    from ncreel.config.settings import Calibration

    Calibration(width=16, height=16, dpi=10, preset="ultrafast", crf=18, probe_frames=1,
                base_mb=1, worker_peak_mb=1, encoder_peak_mb=1,
                encoder_cpu_s_per_frame=0, startup_s=0, seconds_per_frame=1,
                render_s_per_frame=0, target_minutes=1, frames_per_shard=1,
                workers=1).to_json(path)


def _png(path):
    # As a shard job writes its PNG frames: into its frames directory, renamed when whole.
    from ncreel.core.io import atomic_path
    from ncreel.render.frame import write_png

    with atomic_path(path.parent / "frames") as frames:
        frames.mkdir()
        write_png(np.random.default_rng(0).integers(0, 255, (300, 300, 4), np.uint8),
                  frames / path.name)


def _figure(path):
    from ncreel.render.frame import write_png
    from ncreel.report.contactsheet import contact_sheet

    frames = []
    for t in range(4):  # on the test's own disk; the sheet goes to the full one
        png = path.parent.parent / f"frame_{t:06d}.png"
        write_png(np.full((60, 90, 4), 40 * t, np.uint8), png)
        frames.append((t, png))
    contact_sheet(frames, {t: str(1990 + t) for t in range(4)}, path, title="x")


def _page(path):
    from ncreel.core.io import atomic_path

    with atomic_path(path) as tmp:
        tmp.write_text("<html>" + "x" * 200_000)


WRITERS = {"copy (polars)": lambda p: _copy(p / "a.copy", "none"),
           "copy gzip": lambda p: _copy(p / "a.copy.gz", "gzip"),
           "copy zstd": lambda p: _copy(p / "a.copy.zst", "zstd"),
           "reduce": lambda p: _reduce(p / "cells.copy"),
           "cell means (numpy)": lambda p: _npy(p / "cell_mean.npy"),
           "calibration (json)": lambda p: _calibration(p / "calibration.json"),
           "frame (PNG)": lambda p: _png(p / "frame.png"),
           "report figure (matplotlib)": lambda p: _figure(p / "contact_sheet.png"),
           "report page (HTML)": lambda p: _page(p / "summary.html")}


@needs_root
@pytest.mark.parametrize("writer", list(WRITERS))
def test_every_writer_on_a_full_disk_is_disk(full_dir, writer):
    with pytest.raises(Exception) as err:  # noqa: PT011 (each writer raises its own kind)
        WRITERS[writer](full_dir)
    assert disk_full(err.value) is not None, repr(err.value)
    assert failure_reason(err.value) == "disk"
    line = disk_full_line(err.value)
    assert line.startswith("no space left on device") and "\n" not in line
    assert "outputs" in line and "time_range" in line and "cells.region" in line
    # nothing partial under a final name
    assert sorted(p.name for p in full_dir.iterdir()) == ["filler"]


def test_polars_disk_error_without_errno_is_disk_not_error():
    """polars' CSV writer says ``OSError('No space left on device (os error 28)')`` with no
    errno: it was classified ``error`` and retried as if more memory might help."""
    import polars as pl

    with pytest.raises(OSError) as err:
        pl.DataFrame({"a": np.arange(100_000)}).write_csv("/dev/full")
    assert err.value.errno is None
    assert failure_reason(err.value) == "disk"
    wrapped = RuntimeError("while writing rows")
    wrapped.__cause__ = err.value
    assert failure_reason(wrapped) == "disk"
    assert failure_reason(DiskFull("ffmpeg could not finish: no space left")) == "disk"
    # text elsewhere in bad input is not a disk: only the errors of writers
    from ncreel.core.errors import NcreelError

    assert failure_reason(NcreelError("file 'no space left on device.nc' missing")) == "data"


def test_a_disk_stop_is_not_run_again():
    ok, line = retry_verdict({"status": "failed", "reason": "disk", "attempt": 1,
                              "message": "no space left on device writing 'x.copy'"}, 2,
                             rule="process_shard", wildcards="shard=00003")
    assert not ok
    assert line.startswith("ncreel: error: process_shard shard=00003: not run again: its "
                           "attempt 1 stopped on a full disk (no space left on device")


_JOB = textwrap.dedent("""
    import sys
    sys.path.insert(0, {workflow!r})
    from ncreel.run.logs import configure
    from ncreel.run.jobrecord import record_attempt

    class Smk:
        log = [{log!r}]
        rule = "process_shard"
        wildcards = {{"shard": "00003"}}
        resources = {{"mem_mb": 100, "runtime": 5, "attempt": {attempt}}}
        threads = 1

    configure(Smk.log[0])
    record_attempt(Smk)
    import numpy as np
    from ncreel.core.io import atomic_path
    from ncreel.pg.copytext import open_copy_writer, write_copy_rows

    with atomic_path({out!r}) as tmp, open_copy_writer(tmp) as fh:
        write_copy_rows(fh, {{"value": np.arange(200_000, dtype=np.float64)}})
""")


@needs_root
def test_a_job_on_a_full_disk_ends_in_one_line_recorded_disk(full_dir, tmp_path):
    from ncreel.cluster.runstatus import disk_stop

    log = tmp_path / "logs" / "r" / "process_shard" / "00003.log"
    log.parent.mkdir(parents=True)
    out = full_dir / "00003.copy"

    def job(attempt):
        code = _JOB.format(workflow=str(ROOT / "workflow"), log=str(log), out=str(out),
                           attempt=attempt)
        return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                              timeout=120)

    proc = job(1)
    assert proc.returncode != 0
    assert "Traceback" not in proc.stderr, proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    said = [ln for ln in lines if "ncreel: error:" in ln]
    assert len(said) == 1, proc.stderr
    assert f"no space left on device writing '{out}'" in said[0]
    assert "MB free there now" in said[0]
    attempts = read_attempts(log.parent / "00003.log.attempts.jsonl")
    assert attempts[-1]["reason"] == "disk" and "no space left" in attempts[-1]["message"]
    assert not out.exists() and not out.with_name("00003.copy.part").exists()
    # Snakemake's retry does nothing and says why; ncreel status names the disk.
    again = job(2)
    assert again.returncode != 0
    assert "not run again: its attempt 1 stopped on a full disk" in again.stderr
    assert disk_stop(tmp_path, "r").startswith("process_shard 00003: no space left on "
                                              "device writing")


@needs_root
def test_the_job_log_on_a_full_disk_stops_in_one_line(full_dir):
    import logging

    from ncreel.run.logs import JobLogHandler

    handler = JobLogHandler(full_dir / "job.log", mode="a")
    logger = logging.getLogger("ncreel.test_disk_full")
    logger.addHandler(handler)
    try:
        code = textwrap.dedent(f"""
            import logging, sys
            sys.path.insert(0, {str(ROOT / 'workflow')!r})
            from ncreel.run.logs import JobLogHandler
            h = JobLogHandler({str(full_dir / 'job.log')!r}, mode="a")
            log = logging.getLogger("x")
            log.addHandler(h)
            for i in range(2000):
                log.error("line %d %s", i, "x" * 200)
        """)
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                              timeout=60)
    finally:
        logger.removeHandler(handler)
        handler.close()
    assert proc.returncode == 0
    assert "Logging error" not in proc.stderr and "Traceback" not in proc.stderr
    assert proc.stderr.count("ncreel: warning: the job's log") == 1, proc.stderr


def test_status_says_the_disk_not_interrupted(tmp_path):
    from ncreel.cluster import runstatus

    work = tmp_path
    out = work / "results" / "r"
    out.mkdir(parents=True)
    (out / "stats.json").write_text(json.dumps({"n_time": 4}))
    (out / "calibration.json").write_text(json.dumps({
        "width": 16, "height": 16, "dpi": 10, "preset": "ultrafast", "crf": 18,
        "probe_frames": 1, "base_mb": 1, "worker_peak_mb": 1, "encoder_peak_mb": 1,
        "encoder_cpu_s_per_frame": 0, "startup_s": 0, "seconds_per_frame": 1,
        "render_s_per_frame": 0, "target_minutes": 1, "frames_per_shard": 2,
        "workers": 1}))
    record = work / "logs" / "r" / "process_shard" / "00001.log.attempts.jsonl"
    record.parent.mkdir(parents=True)
    record.write_text(
        json.dumps({"event": "start", "rule": "process_shard", "wildcards": {"shard": "00001"},
                    "attempt": 1, "pid": 7, "host": "h", "start": 1.0}) + "\n"
        + json.dumps({"event": "end", "pid": 7, "host": "h", "attempt": 1, "ok": False,
                      "end": 2.0, "reason": "disk",
                      "message": "no space left on device writing 'results/r/cells/"
                                 "00001.copy' (3 MB free there now)"}) + "\n")
    import contextlib
    import io

    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        assert runstatus.main(["--run", "r", "--workdir", str(work)]) == 0
    text = buf.getvalue()
    assert "interrupted" not in text.splitlines()[-1]
    assert text.splitlines()[-1] == ("run r: stopped on a full disk (process_shard 00001: no "
                                     "space left on device writing 'results/r/cells/"
                                     "00001.copy' (3 MB free there now))")
    assert "attempt 1 failed: disk" in text


def test_the_database_servers_full_disk_is_named_as_the_servers():
    """A load meeting PostgreSQL's disk_full (SQLSTATE 53100) is ``disk`` too, and its line
    says the server's disk, not ours."""
    import psycopg.errors

    err = psycopg.errors.DiskFull('could not extend file "base/5/16384": No space left on '
                                  "device")
    assert failure_reason(err) == "disk"
    assert disk_full_line(err).startswith("the database server's disk is full (could not "
                                          "extend file")
