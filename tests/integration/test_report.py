"""Inspecting a run: resources page, contact sheet, progress lines, status, report edges.

Progress lines on their own (no run) are in ``tests/test_progress.py``.

One small real run (160 x 96 frames, two shards) in which the first shard's job is killed
with SIGKILL while it renders, as the kernel's OOM killer or a scheduler would, so that it
needs a second attempt; the report is then built by ``snakemake --report`` and its embedded
data are checked against the benchmark files.
"""

from __future__ import annotations

import base64
import csv
import html
import io
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time

import pytest
from conftest import ROOT, missing_program_reason
from PIL import Image
from workflow_run import SMALL, make_workdir, snakemake

sys.path.insert(0, str(ROOT / "workflow"))

from ncreel.cluster.runstatus import shard_status  # noqa: E402
from ncreel.input.source import open_series  # noqa: E402
from ncreel.render.segment import time_labels  # noqa: E402
from ncreel.report.contactsheet import frame_labels, sampled_frames  # noqa: E402
from ncreel.report.resourcepage import PNG_KEY, read_benchmark  # noqa: E402
from ncreel.run.jobrecord import read_attempts  # noqa: E402

CONFIG = [*SMALL, "frames_per_shard=120", "calibration_frames=16"]


def _report_files(html: str) -> dict[str, bytes]:
    """Files embedded in a Snakemake HTML report, by file name."""
    found = {}
    for m in re.finditer(r"data:[^;\"']+;charset=[^;\"']+;filename=([^;\"']+);base64,"
                         r"([A-Za-z0-9+/=]+)", html):
        found[m.group(1)] = base64.b64decode(m.group(2))
    return found


def _wait_for(predicate, timeout=240.0, what=""):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        value = predicate()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.fixture(scope="module")
def killed_run(tmp_path_factory, sample_nc):
    work = make_workdir(tmp_path_factory.mktemp("inspect"))
    (work / "resources").mkdir()
    shutil.copy(sample_nc, work / "resources" / "A1B_north_america.nc")
    cmd = [sys.executable, "-m", "snakemake", "--cores", "2", "--config", *CONFIG]
    proc = subprocess.Popen(cmd, cwd=work, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)
    record = work / "logs/demo/process_shard/00000.log.attempts.jsonl"
    job_log = work / "logs/demo/process_shard/00000.log"

    def rendering():
        # Kill while frames are being drawn (a progress line is in the job log).
        if record.is_file() and job_log.is_file() and "frames (" in job_log.read_text():
            return json.loads(record.read_text().splitlines()[0])["pid"]
        return None

    try:
        pid = _wait_for(rendering, what="shard 00000 to render")
        os.kill(pid, signal.SIGKILL)
        out, _ = proc.communicate(timeout=600)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, out[-4000:]
    return work, out


def test_progress_in_job_log_not_in_snakemake_output(killed_run):
    work, out = killed_run
    log = (work / "logs/demo/process_shard/00001.log").read_text()
    lines = [x for x in log.splitlines() if "ncreel.run.progress" in x]
    frames = [x for x in lines if "frames 120..239:" in x]
    # 10 % steps of 120 frames (or 30 s apart): about 10 lines, the last one complete.
    assert 10 <= len(frames) <= 12
    assert "120/120 frames (100 %)" in frames[-1] and "frames/s" in frames[-1]
    assert any("rows_written 217560" in x for x in lines)
    # Snakemake prints the killed attempt's log (show-failed-logs); nothing else of it.
    assert "frames 120..239" not in out and "shard 00001 rows" not in out


def test_resources_page_counts_the_retry(killed_run):
    work, _ = killed_run
    rows = {(r["rule"], r["job"]): r for r in
            csv.DictReader(io.StringIO((work / "results/demo/report/resources.csv").read_text()))}
    killed, other = rows[("process_shard", "00000")], rows[("process_shard", "00001")]
    assert (killed["attempts"], killed["failed_attempts"]) == ("2", "1")
    assert (other["attempts"], other["failed_attempts"]) == ("1", "0")
    # Attempt 2 declares twice its base memory (mem_mb = base x attempt).
    assert int(killed["mem_mb"]) == 2 * int(other["mem_mb"])
    assert {r for r, _ in rows} >= {"statistics", "calibrate_render", "process_shard",
                                    "reduce_cells", "concat_segments", "preview"}


def test_report_data_match_benchmarks(killed_run):
    work, _ = killed_run
    proc = snakemake(work, "--report", "report.html", "--config", *CONFIG)
    assert "never awaited" not in proc.stderr
    files = _report_files((work / "report.html").read_text())
    assert {"resources.png", "resources.html", "resources.csv", "contact_sheet.png",
            "plan.html"} <= set(files)
    plotted = json.loads(Image.open(io.BytesIO(files["resources.png"])).text[PNG_KEY])
    table = list(csv.DictReader(io.StringIO(files["resources.csv"].decode())))
    assert len(plotted) == len(table) == 7  # 2 shards + 5 other jobs
    for fig, row in zip(plotted, table, strict=True):
        name = "process_shard/" + fig["job"] if fig["rule"] == "process_shard" else fig["rule"]
        bench = read_benchmark(work / f"results/demo/benchmarks/{name}.tsv")
        assert fig["wall_s"] == pytest.approx(bench["s"], abs=0.01)
        if bench["max_rss"]:
            assert fig["max_rss_mb"] == pytest.approx(bench["max_rss"])
            assert fig["mem_headroom"] == pytest.approx(fig["mem_mb"] / bench["max_rss"],
                                                        rel=1e-3)
            assert float(row["max_rss_mb"]) == pytest.approx(bench["max_rss"])
        else:  # ended before Snakemake's first memory sample (seen on a busy machine)
            assert fig["max_rss_mb"] is None and fig["mem_headroom"] is None
            assert row["max_rss_mb"] == "" and "not sampled" in row["flags"]
        log = work / f"logs/demo/{name}.log.attempts.jsonl"
        last = [json.loads(x) for x in log.read_text().splitlines() if '"start"' in x][-1]
        assert fig["mem_mb"] == last["mem_mb"] and fig["runtime_min"] == last["runtime"]
    stats = json.loads((work / "results/demo/stats.json").read_text())
    plan = files["plan.html"].decode()
    assert str(stats["vmin"]) in plan and "2 % percentile" in plan
    assert "2 shard(s), 240 frames" in plan
    sheet = Image.open(io.BytesIO(files["contact_sheet.png"]))
    assert sheet.width > 500 and sheet.height > 300


def test_kept_frames_carry_the_inputs_time_labels(killed_run, sample_nc):
    # The contact sheet's titles come from the frames themselves (no second input read).
    work, _ = killed_run
    frames = sampled_frames(sorted((work / "results/demo/frames").iterdir()))
    with open_series(str(sample_nc), "air_temperature") as series:
        truth = time_labels(series)
    assert len(frames) >= 2
    assert frame_labels(frames) == {t: truth[t] for t, _ in frames}


def test_report_summary_plays_the_movie_with_the_run_numbers(killed_run, tmp_path):
    work, _ = killed_run
    snakemake(work, "--report", "report.html", "--config", *CONFIG)
    files = _report_files((work / "report.html").read_text())
    page = files["summary.html"].decode()
    numbers = json.loads(html.unescape(
        re.search(r"id='ncreel-summary'>(.*?)</script>", page).group(1)))
    assert (numbers["frames"], numbers["cells"], numbers["values"]) == (240, 1813, 435_120)
    assert numbers["shards"] == 2 and numbers["retried"] == 1  # the killed shard
    assert numbers["copy_bytes"] == (work / "results/demo/cells.copy").stat().st_size
    assert numbers["shard_peak_mb"] > 0 and numbers["core_hours"] > 0
    movie = (work / "results/demo/movie.mp4").read_bytes()
    assert base64.b64encode(movie).decode() in page
    assert_plays_in_chromium(page, tmp_path)


def assert_plays_in_chromium(page: str, tmp_path) -> None:
    """Open the report's summary page in headless Chromium: the movie plays (its time past
    1 s, pixels decoded), not only its poster shows. Skips without Chromium."""
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        pytest.skip(missing_program_reason("chromium"))
    # The page as the report shows it, made to start playing muted and to report what the
    # browser decoded after three seconds.
    probe = page.replace("<video id='movie' controls", "<video id='movie' controls muted "
                         "autoplay").replace("</body>", _PLAY_PROBE + "</body>")
    (tmp_path / "probe.html").write_text(probe)
    dom = subprocess.run([chromium, "--headless=new", "--no-sandbox", "--disable-gpu",
                          "--autoplay-policy=no-user-gesture-required",
                          f"--user-data-dir={tmp_path / 'profile'}",
                          "--virtual-time-budget=8000", "--dump-dom",
                          (tmp_path / "probe.html").as_uri()],
                         capture_output=True, text=True, timeout=120).stdout
    played = dict(kv.split("=") for kv in
                  re.search(r'data-probe="([^"]*)"', dom).group(1).split())
    assert played["err"] == "0" and played["ready"] == "4", played
    assert float(played["time"]) > 1.0, played  # it played, not only showed the poster
    assert int(played["sum"]) > 0, played  # decoded pixels drawn


_PLAY_PROBE = """<script>
const v = document.getElementById('movie');
setTimeout(() => {
  const c = document.createElement('canvas'); c.width = 64; c.height = 36;
  const x = c.getContext('2d'); x.drawImage(v, 0, 0, 64, 36);
  let s = 0; for (const b of x.getImageData(0, 0, 64, 36).data) s += b;
  document.body.setAttribute('data-probe', 'time=' + v.currentTime.toFixed(2) + ' ready=' +
    v.readyState + ' err=' + (v.error ? v.error.code : 0) + ' sum=' + s);
}, 3000);
</script>"""


def test_status_and_shard_outside_plan(killed_run):
    work, _ = killed_run
    assert [r["state"] for r in shard_status(work, "demo")] == ["done", "done"]
    proc = snakemake(work, "-n", "results/demo/segments/00007.mp4", "--config", *CONFIG,
                     check=False)
    assert proc.returncode != 0
    err = [x for x in proc.stderr.splitlines() if "ncreel: error" in x]
    assert err == ["ncreel: error: shard 00007 is not in the plan of run 'demo': it has 2 "
                   "shard(s), 00000..00001 (120 frames each, from results/demo/"
                   "calibration.json); ask for one of those"]
    assert "KeyError" not in proc.stderr
    (work / "results/demo/segments/00001.mp4").unlink()
    out = subprocess.run([sys.executable, "-m", "ncreel.cluster.runstatus"], cwd=work, check=True,
                         capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": str(ROOT / "workflow")}).stdout
    assert re.search(r"^00000\s+120\s+done\s+2\b", out, re.M)
    assert re.search(r"^00001\s+120\s+to do\s+1\b", out, re.M)
    assert "2 shards: 1 done, 0 running, 0 failed, 0 interrupted, 1 to do" in out
    assert "run demo: interrupted (no process holds results/demo/.ncreel-run.lock)" in out


def test_attempts_record_failed_then_ok(tmp_path):
    """A rule whose first attempt raises: its record holds both attempts, with the
    resources Snakemake evaluated for each."""
    (tmp_path / "Snakefile").write_text(
        'rule x:\n    output: "x.txt"\n    log: "logs/x.log"\n'
        "    resources: mem_mb=lambda wc, attempt: 100 * attempt, runtime=1\n"
        '    script: "x.py"\n')
    (tmp_path / "x.py").write_text(
        f"import sys\nsys.path.insert(0, {str(ROOT / 'workflow')!r})\n"
        "from ncreel.run.jobrecord import record_attempt\nrecord_attempt(snakemake)\n"
        "if snakemake.resources.mem_mb < 200:\n    raise RuntimeError('first attempt')\n"
        "open(snakemake.output[0], 'w').write('ok')\n")
    subprocess.run([sys.executable, "-m", "snakemake", "--cores", "1", "--retries", "1"],
                   cwd=tmp_path, check=True, capture_output=True)
    got = read_attempts(tmp_path / "logs/x.log.attempts.jsonl")
    assert [(a["attempt"], a["mem_mb"], a["status"]) for a in got] == [(1, 100, "failed"),
                                                                         (2, 200, "ok")]


def test_attempts_record_follows_snakemake_when_outputs_are_missing(tmp_path):
    """A rule whose first attempt's script ends well but writes no output: Snakemake
    fails the job and retries it as attempt 2. With the ``attempt`` resource the record
    numbers it 2 and reads attempt 1 as failed after its script (it was ``attempt 1``
    twice, the first read as the result)."""
    (tmp_path / "Snakefile").write_text(
        'rule x:\n    output: "x.txt"\n    log: "logs/x.log"\n'
        "    resources: attempt=lambda wc, attempt: attempt, mem_mb=100\n"
        '    script: "x.py"\n')
    (tmp_path / "x.py").write_text(
        f"import sys\nsys.path.insert(0, {str(ROOT / 'workflow')!r})\n"
        "from ncreel.run.jobrecord import record_attempt\nrecord_attempt(snakemake)\n"
        "if snakemake.resources.attempt > 1:\n"
        "    open(snakemake.output[0], 'w').write('ok')\n")
    subprocess.run([sys.executable, "-m", "snakemake", "--cores", "1", "--retries", "1",
                    "--latency-wait", "1"], cwd=tmp_path, check=True, capture_output=True)
    got = read_attempts(tmp_path / "logs/x.log.attempts.jsonl")
    assert [(a["attempt"], a["status"], a.get("reason")) for a in got] == [
        (1, "failed", "after_script"), (2, "ok", None)]
