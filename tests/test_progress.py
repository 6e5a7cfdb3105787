"""Progress lines in a job's log (``ncreel.run.progress``), at a bounded rate, not on stderr."""

import logging
import re

from ncreel.run.logs import configure
from ncreel.run.progress import Progress


class FakeClock:
    def __init__(self, step):
        self.t, self.step = 0.0, step

    def __call__(self):
        self.t += self.step
        return self.t


def test_progress_bounded_rate_and_job_log_only(tmp_path, capsys):
    root = logging.getLogger()
    saved_handlers, saved_level = root.handlers[:], root.level
    try:
        configure(tmp_path / "job.log")
        fast = Progress(1000, "shard 00000 frames 0..999", clock=FakeClock(0.01))
        for i in range(1, 1001):
            fast.update(i)
        # Fast work: one line per 10 %.
        assert fast.lines == 10
        slow = Progress(1000, "slow", clock=FakeClock(7.0))
        for i in range(1, 201):
            slow.update(i, rows_written=i * 10)
        # Slow work (7 s per frame): a line every 30 s at most, plus the 10 % marks.
        assert slow.lines <= 200 * 7 / 30 + 2 + 1
    finally:
        for h in root.handlers:
            if h not in saved_handlers:
                h.close()
        root.handlers[:] = saved_handlers
        root.setLevel(saved_level)
        logging.captureWarnings(False)
    text = (tmp_path / "job.log").read_text()
    assert "shard 00000 frames 0..999: 500/1000 frames (50 %)" in text
    assert "1000/1000 frames (100 %)" in text and "ETA 0 s" in text
    assert re.search(r"slow: \d+/1000 frames .*ETA \d+ s, rows_written \d+", text)
    assert "ncreel.run.progress" not in capsys.readouterr().err


# ------------------------------------------------------------------ the controller's lines
import json  # noqa: E402
import os  # noqa: E402
import socket  # noqa: E402
from base64 import urlsafe_b64encode  # noqa: E402

from ncreel.cluster.runwatch import RunCounts, run_line, shard_frames_done, watch_run  # noqa: E402
from test_cluster_runstatus import CALIBRATION  # noqa: E402


class SetClock:
    def __init__(self):
        self.t = 1000.0

    def __call__(self):
        return self.t


def _attempts(logs, shard, *, ok):
    recs = [{"event": "start", "rule": "process_shard", "attempt": 1, "start": 1.0,
             "host": socket.gethostname(), "pid": os.getpid(), "scheduler": None,
             "jobid": None}]
    if ok:
        recs.append({"event": "end", "pid": os.getpid(), "ok": True, "end": 2.0})
    (logs / f"{shard}.log.attempts.jsonl").write_text("".join(json.dumps(r) + "\n"
                                                               for r in recs))


def _marker(work, shard, jobid=None):
    inc = work / ".snakemake" / "incomplete"
    inc.mkdir(parents=True, exist_ok=True)
    name = urlsafe_b64encode(f"results/r/segments/{shard}.mp4".encode()).decode()
    (inc / name).write_text(json.dumps({"external_jobid": jobid}))
    return inc / name


def _worker_line(shard, start, stop, done):
    return (f"2026-12-01 10:00:00,000 INFO ncreel.run.progress[42]: shard {shard} frames "
            f"{start}..{stop}: {done}/{stop - start + 1} frames (50 %), 1.00 frames/s, "
            "ETA 5 s\n")


def test_controller_lines_from_a_runs_records(tmp_path):
    """Five shards of 40 frames: two done, one running (two render workers, 15 frames
    drawn), one submitted to a scheduler but not started, one not submitted."""
    out, logs = tmp_path / "results" / "r", tmp_path / "logs" / "r" / "process_shard"
    (out / "segments").mkdir(parents=True)
    logs.mkdir(parents=True)
    (out / "stats.json").write_text(json.dumps({"n_time": 200, "outputs": ["movie"]}))
    (out / "calibration.json").write_text(json.dumps(CALIBRATION))  # 40 frames per shard
    for shard in ("00000", "00001"):
        (out / "segments" / f"{shard}.mp4").write_bytes(b"x")
        _attempts(logs, shard, ok=True)
    marker = _marker(tmp_path, "00002")
    _attempts(logs, "00002", ok=False)
    log = logs / "00002.log"
    log.write_text(_worker_line("00002", 80, 99, 4) + "other text\n"
                   + _worker_line("00002", 80, 99, 10) + _worker_line("00002", 100, 119, 5))
    _marker(tmp_path, "00003", jobid="7.pbsserver")
    assert shard_frames_done(log) == 15 and shard_frames_done(logs / "none.log") == 0

    said, clock = [], SetClock()
    # A resumed run: 95 frames were done when its controller started.
    watch = watch_run(tmp_path, "r", said.append, clock=clock, poll_s=3600)
    watch.start()
    assert watch.poll() == "ncreel: shards 2/5 done, 1 running, 2 queued · - frames/s · ETA ?"
    assert watch.counts == RunCounts(shards=5, done=2, running=1, queued=2, frames=200,
                                     frames_done=95)
    # 25 frames more in 25 s: no line yet (under 30 s, no shard more done).
    log.write_text(_worker_line("00002", 80, 99, 20) + _worker_line("00002", 100, 119, 20))
    clock.t += 25
    assert watch.poll() is None
    # Shard 00002 done at 50 s: 25 frames in 50 s, 80 left.
    (out / "segments" / "00002.mp4").write_bytes(b"x")
    _attempts(logs, "00002", ok=True)
    marker.unlink()
    clock.t += 25
    assert watch.poll() == ("ncreel: shards 3/5 done, 0 running, 2 queued · 0.5 frames/s · "
                            "ETA 00:02:40")
    clock.t += 10
    assert watch.finish(ok=False) == ("ncreel: run stopped after 00:01:00: shards 3/5 done, "
                                      "2 not · 0.42 frames/s; the same command resumes it")
    assert said == watch.lines and len(said) == 3
    for shard in ("00003", "00004"):
        (out / "segments" / f"{shard}.mp4").write_bytes(b"x")
    (tmp_path / ".snakemake" / "incomplete").rename(tmp_path / "gone")
    clock.t += 20
    assert watch.finish(ok=True) == "ncreel: shards 5/5 done · 1.3 frames/s · 00:01:20 in all"


def test_controller_line_format_and_bounded_rate(tmp_path):
    c = RunCounts(shards=120, done=37, running=8, queued=75, frames=120_000,
                  frames_done=37_000)
    assert run_line(c, 412.3) == ("ncreel: shards 37/120 done, 8 running, 75 queued · "
                                  "412 frames/s · ETA 00:03:21")
    # A frame more every second for 10 minutes: a line every 30 s, not every poll.
    rows = [{"shard": f"{i:05d}", "frames": 1000, "state": "to do", "started": False}
            for i in range(120)]
    rows[0].update(state="running", started=True)
    clock, said = SetClock(), []
    logs = tmp_path / "logs"
    logs.mkdir()
    from ncreel.cluster.runwatch import RunWatch

    watch = RunWatch(lambda: rows, said.append, log_of=lambda s: logs / f"{s}.log",
                     clock=clock)
    for second in range(600):
        (logs / "00000.log").write_text(_worker_line("00000", 0, 999, second))
        watch.poll()
        clock.t += 1
    assert 600 / 30 <= len(said) <= 600 / 30 + 1
    # Nothing changes: a line only after quiet_s (300 s).
    said.clear()
    for _ in range(600):
        watch.poll()
        clock.t += 1
    assert len(said) == 2


def test_controller_rate_counts_from_the_plan_not_from_the_first_line(tmp_path):
    """Frames drawn between the plan's appearance and the first read that sees it count
    over the time since the last read that found no plan (a rate never overstated)."""
    from ncreel.cluster.runwatch import RunWatch

    rows = [{"shard": "00000", "frames": 100, "state": "to do", "started": False}]
    plan = []

    def read_rows():
        if not plan:
            raise FileNotFoundError("calibration.json")
        return rows

    clock, said = SetClock(), []
    watch = RunWatch(read_rows, said.append, clock=clock)
    watch.start()
    clock.t += 5
    assert watch.poll() is None and not said
    plan.append(1)
    rows[0]["state"] = "done"  # all 100 frames drawn before the next read
    clock.t += 5
    assert watch.poll() == ("ncreel: shards 1/1 done, 0 running, 0 queued · 20 frames/s · "
                            "ETA 00:00:00")
    clock.t += 5
    assert watch.finish(ok=True) == "ncreel: shards 1/1 done · 10 frames/s · 00:00:15 in all"
