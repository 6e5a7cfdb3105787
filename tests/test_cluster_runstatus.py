"""``ncreel.cluster.runstatus``: shard states read from files after a killed run."""

import json
import socket
from base64 import urlsafe_b64encode

from ncreel.cluster.runstatus import shard_status

CALIBRATION = {"width": 160, "height": 96, "dpi": 100, "preset": "medium", "crf": 18,
               "probe_frames": 64, "base_mb": 37.8, "worker_peak_mb": 145.5,
               "encoder_peak_mb": 59.8, "encoder_cpu_s_per_frame": 0.0024, "startup_s": 1.8,
               "seconds_per_frame": 0.037, "render_s_per_frame": 0.0056, "target_minutes": 10,
               "frames_per_shard": 40, "workers": 1}


def make_run(work, *, end_ok):
    out = work / "results" / "r"
    (out / "segments").mkdir(parents=True)
    (out / "stats.json").write_text(json.dumps({"n_time": 40}))
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


def test_finished_job_of_killed_snakemake_is_done(tmp_path):
    # kill -9 of Snakemake right after a shard finished leaves the incomplete marker; the
    # rerun keeps the shard (it does not redo it) and the status must not say failed.
    make_run(tmp_path, end_ok=True)
    [row] = shard_status(tmp_path, "r")
    assert row["state"] == "done"


def test_unfinished_job_of_killed_snakemake_is_failed(tmp_path):
    make_run(tmp_path, end_ok=False)
    [row] = shard_status(tmp_path, "r")
    assert row["state"] == "failed"
