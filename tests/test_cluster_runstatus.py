"""``ncreel.cluster.runstatus``: shard states read from files after a killed run."""

import contextlib
import json
import os
import socket
import subprocess
import sys
from base64 import urlsafe_b64encode

from conftest import ROOT
from ncreel.cluster.runstatus import run_holder, shard_status

CALIBRATION = {"width": 160, "height": 96, "dpi": 100, "preset": "medium", "crf": 18,
               "probe_frames": 64, "base_mb": 37.8, "worker_peak_mb": 145.5,
               "encoder_peak_mb": 59.8, "encoder_cpu_s_per_frame": 0.0024, "startup_s": 1.8,
               "seconds_per_frame": 0.037, "render_s_per_frame": 0.0056, "target_minutes": 10,
               "frames_per_shard": 40, "workers": 1}


def make_run(work, *, end_ok):
    out = work / "results" / "r"
    (out / "segments").mkdir(parents=True)
    (out / "stats.json").write_text(json.dumps({"n_time": 40, "outputs": ["movie"]}))
    (out / "calibration.json").write_text(json.dumps(CALIBRATION))
    (out / "segments" / "00000.mp4").write_bytes(b"x")
    inc = work / ".snakemake" / "incomplete"
    inc.mkdir(parents=True)
    name = urlsafe_b64encode(b"results/r/segments/00000.mp4").decode()
    (inc / name).write_text(json.dumps({"external_jobid": None}))
    logs = work / "logs" / "r" / "process_shard"
    logs.mkdir(parents=True)
    recs = [{"event": "start", "rule": "process_shard", "attempt": 1, "start": 1.0,
             "host": socket.gethostname(), "pid": 2 ** 22 + 7, "scheduler": None,
             "jobid": None}]
    if end_ok:
        recs.append({"event": "end", "pid": 2 ** 22 + 7, "ok": True, "end": 2.0})
    (logs / "00000.log.attempts.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))


def test_finished_job_of_killed_snakemake_is_interrupted_not_failed(tmp_path):
    # kill -9 (or two Ctrl-C) of Snakemake right after a shard finished leaves the
    # incomplete marker; the same command redoes the shard (the workflow's
    # redo_interrupted, seen with snakemake -n), so it is not done, nor failed.
    make_run(tmp_path, end_ok=True)
    [row] = shard_status(tmp_path, "r")
    assert (row["state"], row["detail"]) == (
        "interrupted", "finished, but its Snakemake was stopped before recording it: the "
        "same command redoes it")


def test_unfinished_job_of_killed_snakemake_is_interrupted(tmp_path):
    make_run(tmp_path, end_ok=False)
    [row] = shard_status(tmp_path, "r")
    assert row["state"] == "interrupted"


def stale_snakemake_lock(work):
    # What a Snakemake ended by SIGHUP or SIGKILL leaves: its own lock files.
    locks = work / ".snakemake" / "locks"
    locks.mkdir(parents=True)
    (locks / "0.input.lock").write_text("x")


def marked_not_started(work):
    """A shard Snakemake marked incomplete whose job never recorded a start."""
    make_run(work, end_ok=False)
    (work / "logs" / "r" / "process_shard" / "00000.log.attempts.jsonl").unlink()
    (work / "results" / "r" / "segments" / "00000.mp4").unlink()


def test_no_lock_holder_means_interrupted_not_starting(tmp_path):
    # After an SSH drop Snakemake's lock files stay; no process holds ncreel's run lock,
    # so a marked shard is not "running ... starting" but interrupted.
    marked_not_started(tmp_path)
    stale_snakemake_lock(tmp_path)
    (tmp_path / "results" / "r" / ".ncreel-run.lock").write_text("4194311\n")
    assert run_holder(tmp_path, "r") is None
    [row] = shard_status(tmp_path, "r")
    assert row["state"] == "interrupted" and "same command" in row["detail"]


@contextlib.contextmanager
def _hold(lock):
    """A process holding the run lock (as a running Snakemake does); SIGKILLed at the end."""
    code = ("import sys, time; sys.path.insert(0, sys.argv[2]); "
            "from ncreel.cluster.runlock import hold_run_lock; hold_run_lock(sys.argv[1], 'r'); "
            "print('held', flush=True); time.sleep(60)")
    with subprocess.Popen([sys.executable, "-c", code, str(lock), str(ROOT / "workflow")],
                          stdout=subprocess.PIPE, text=True) as proc:
        try:
            assert proc.stdout.readline() == "held\n"
            yield proc
        finally:
            proc.kill()  # SIGKILL: the kernel releases the flock, the file stays


def test_live_lock_holder_means_running_then_interrupted_when_it_dies(tmp_path):
    marked_not_started(tmp_path)
    with _hold(tmp_path / "results" / "r" / ".ncreel-run.lock") as holder:
        assert run_holder(tmp_path, "r") == holder.pid
        [row] = shard_status(tmp_path, "r")
        assert (row["state"], row["detail"]) == ("running", "starting")
        out = _status_cli(tmp_path)
        assert f"run r: running (Snakemake pid {holder.pid} holds" in out
    assert run_holder(tmp_path, "r") is None
    [row] = shard_status(tmp_path, "r")
    assert row["state"] == "interrupted"
    out = _status_cli(tmp_path)
    assert "1 shard: 0 done, 0 running, 0 failed, 1 interrupted, 0 to do" in out
    assert "run r: interrupted (no process holds results/r/.ncreel-run.lock)" in out


def test_job_gone_while_its_snakemake_runs_is_failed(tmp_path):
    make_run(tmp_path, end_ok=False)
    with _hold(tmp_path / "results" / "r" / ".ncreel-run.lock"):
        [row] = shard_status(tmp_path, "r")
    assert row["state"] == "failed"


def test_finished_job_of_killed_snakemake_is_to_do_while_its_rerun_runs(tmp_path):
    # After kill -9 right after a shard finished, the rerun redoes the shard: until its
    # job starts, the shard is to do (not "starting", not done).
    make_run(tmp_path, end_ok=True)  # the job ended at t = 2 s
    marker = tmp_path / ".snakemake" / "incomplete" / urlsafe_b64encode(
        b"results/r/segments/00000.mp4").decode()
    os.utime(marker, (1.5, 1.5))  # written when the job started
    with _hold(tmp_path / "results" / "r" / ".ncreel-run.lock"):
        [row] = shard_status(tmp_path, "r")
        assert (row["state"], row["detail"]) == (
            "to do", "finished, but its Snakemake was stopped before recording it: this run "
            "redoes it")
        os.utime(marker)  # marked again now: the rerun is redoing the shard
        [row] = shard_status(tmp_path, "r")
        assert (row["state"], row["detail"]) == ("running", "starting")


def _status_cli(work):
    return subprocess.run([sys.executable, "-m", "ncreel.cluster.runstatus", "--run", "r"],
                          cwd=work, check=True, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(ROOT / "workflow")}).stdout


def test_run_job_ids_are_the_runs_own_queued_and_started_jobs(tmp_path):
    """A queued job's id is in its outputs' incomplete marker; a started one's in its
    attempts record (its own Snakemake rewrote the marker without it). Another run's
    jobs and finished attempts are not the run's."""
    from ncreel.cluster.runstatus import run_job_ids
    from ncreel.run.incomplete import marker_path

    for output, jobid in (("results/b/segments/00000.mp4", "11"),
                          ("results/a/segments/00000.mp4", "12"),
                          ("results/b/segments/00001.mp4", None)):
        marker = marker_path(tmp_path, output)
        marker.parent.mkdir(parents=True, exist_ok=True)
        marker.write_text(json.dumps({"external_jobid": jobid} if jobid else {}))
    shard = tmp_path / "logs/b/process_shard"
    shard.mkdir(parents=True)
    start = {"event": "start", "attempt": 1, "pid": 1, "host": "n1", "scheduler": "slurm"}
    (shard / "00001.log.attempts.jsonl").write_text(json.dumps({**start, "jobid": "13"}))
    (shard / "00002.log.attempts.jsonl").write_text(
        json.dumps({**start, "jobid": "14"}) + "\n"
        + json.dumps({"event": "end", "attempt": 1, "pid": 1, "host": "n1", "ok": True}))
    assert run_job_ids(tmp_path, "b") == {"11", "13"}
    assert run_job_ids(tmp_path, "a") == {"12"}


def test_a_failed_shard_says_why(tmp_path):
    """A shard deleted with qdel or scancel reads as stopped by its signal, not a crash."""
    make_run(tmp_path, end_ok=False)
    (tmp_path / ".snakemake/incomplete").joinpath(
        urlsafe_b64encode(b"results/r/segments/00000.mp4").decode()).unlink()
    (tmp_path / "results/r/segments/00000.mp4").unlink()
    rec = tmp_path / "logs/r/process_shard/00000.log.attempts.jsonl"
    with rec.open("a") as fh:
        fh.write(json.dumps({"event": "end", "pid": 2 ** 22 + 7, "attempt": 1, "ok": False,
                             "end": 2.0, "reason": "interrupted", "signal": "SIGTERM"}) + "\n")
    [row] = shard_status(tmp_path, "r")
    assert (row["state"], row["detail"]) == ("failed",
                                             "attempt 1 failed: interrupted by SIGTERM")


def finished_run(work):
    """A run whose one shard finished: its attempts record ended well, no marker."""
    make_run(work, end_ok=True)
    os.utime(work / "results" / "r" / "segments" / "00000.mp4")  # after the statistics
    for inc in (work / ".snakemake" / "incomplete").iterdir():
        inc.unlink()


def ask_for(work, outputs):
    """The run's statistics as a run of config `outputs` writes them (kept older)."""
    stats = work / "results" / "r" / "stats.json"
    mtime = stats.stat().st_mtime
    stats.write_text(json.dumps({"n_time": 40, "outputs": outputs}))
    os.utime(stats, (mtime, mtime))


def test_a_shard_is_done_only_with_every_output_the_runs_outputs_ask_for(tmp_path):
    # outputs changed from [movie] to [movie, table]: the segment alone is not the shard.
    finished_run(tmp_path)
    assert shard_status(tmp_path, "r")[0]["state"] == "done"
    ask_for(tmp_path, ["movie", "table"])
    assert shard_status(tmp_path, "r")[0]["state"] == "to do"
    cells = tmp_path / "results" / "r" / "cells"
    cells.mkdir()
    (cells / "00000.copy.zst").write_bytes(b"x")  # the run's compression, whichever
    assert shard_status(tmp_path, "r")[0]["state"] == "done"
    ask_for(tmp_path, ["table"])
    (tmp_path / "results" / "r" / "segments" / "00000.mp4").unlink()
    assert shard_status(tmp_path, "r")[0]["state"] == "done"
    ask_for(tmp_path, ["movie"])
    assert shard_status(tmp_path, "r")[0]["state"] == "to do"


def test_a_shard_older_than_the_statistics_is_to_do(tmp_path):
    # A rerun with other settings rewrites stats.json first; Snakemake then redoes every
    # shard whose outputs are older, and so must the status say.
    finished_run(tmp_path)
    seg = tmp_path / "results" / "r" / "segments" / "00000.mp4"
    stats = tmp_path / "results" / "r" / "stats.json"
    os.utime(seg, (stats.stat().st_mtime - 60,) * 2)
    [row] = shard_status(tmp_path, "r")
    assert (row["state"], row["detail"]) == (
        "to do", "older than the run's statistics or plan: the next run redoes it")


def _record(work, name, rule, start, *, ok, message=None):
    path = work / "logs" / "r" / f"{name}.log.attempts.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    end = {"event": "end", "pid": 9, "host": "h", "attempt": 1, "ok": ok, "end": start + 1}
    if not ok:
        end.update(reason="data", message=message)
    path.write_text(json.dumps({"event": "start", "rule": rule, "wildcards": {},
                                "attempt": 1, "pid": 9, "host": "h", "start": start}) + "\n"
                    + json.dumps(end) + "\n")


def _run_line(work):
    import io
    from contextlib import redirect_stdout

    from ncreel.cluster import runstatus

    buf = io.StringIO()
    with redirect_stdout(buf):
        assert runstatus.main(["--run", "r", "--workdir", str(work)]) == 0
    return buf.getvalue().splitlines()[-1]


def test_a_run_whose_last_job_failed_is_failed_not_complete(tmp_path):
    """Every shard done, then load_database failed: the run is not complete. A job of
    the run that ends well after it (the next command went on) makes it history."""
    finished_run(tmp_path)
    _record(tmp_path, "reduce_cells", "reduce_cells", 10.0, ok=True)
    assert _run_line(tmp_path) == ("run r: interrupted (movie.mp4 not made yet): run the "
                                   "same snakemake command again to finish")
    (tmp_path / "results" / "r" / "movie.mp4").write_bytes(b"x")
    assert _run_line(tmp_path) == "run r: complete"
    _record(tmp_path, "load_database", "load_database", 20.0, ok=False,
            message='database "nosuchdb" does not exist')
    assert _run_line(tmp_path) == (
        "run r: failed (load_database, attempt 1: database \"nosuchdb\" does not exist; see "
        "logs/r/load_database.log): fix it and run the same snakemake command again")
    _record(tmp_path, "concat_segments", "concat_segments", 30.0, ok=True)
    assert _run_line(tmp_path) == "run r: complete"
