"""Fault injection: kill -9 at seeded points in every rule, fill the disk, rerun, check.

One working directory goes through a chain of runs of the same command. Each seeded
episode starts it and kills the whole process group (snakemake and its jobs, no clean-up)
at a seeded delay after a job of the episode's rule has started; two episodes fill the
file system holding results/ (a tmpfs mounted by the test, so it needs root) during a
process_shard and during reduce_cells, after the run checked that it fits. A last run of
the same command must then leave the movie, the COPY file and the database holding exactly
the input's content.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import xarray as xr
from conftest import fill_disk
from workflow_run import make_workdir

pytestmark = [pytest.mark.integration, pytest.mark.reliability]

#: Rules in the order their jobs first become runnable; three seeds each (21 kills).
RULES = ["statistics", "calibrate_render", "process_shard", "preview", "reduce_cells",
         "load_database", "concat_segments"]
SEEDS = range(21)
LONG_RULES = {"statistics", "calibrate_render", "process_shard"}
N_TIME, NY, NX = 16, 6, 8
RUN, TABLE = "faults", "fault_cells"


def _workdir(tmp_path: Path) -> Path:
    (tmp_path / "work").mkdir()
    return make_workdir(tmp_path / "work")


#: The file that fills the disk while a job runs (another user's).
FILLER = "someone-else"


def _fill_during(work: Path, cmd: list, rule: str, mount: Path) -> subprocess.CompletedProcess:
    """Run `cmd` and, once a `rule` job has started, take every free block of `mount`.

    The run checks that its outputs fit before any job (ncreel.jobs.diskguard), so the
    disk fills after that, as another user's files would: the job is still importing when
    its script file appears, and meets the full disk at its first write.
    """
    seen = _scripts(work)
    proc = subprocess.Popen(cmd, cwd=work, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    deadline = time.time() + 180
    while not {n for n in _scripts(work) - seen if n.endswith(f".{rule}.py")}:
        if proc.poll() is not None or time.time() > deadline:
            out, err = proc.communicate()
            raise AssertionError(f"no {rule} job started: {err[-3000:]}")
        time.sleep(0.01)
    fill_disk(mount, FILLER)
    out, err = proc.communicate(timeout=300)
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)


def _scripts(work: Path) -> set[str]:
    d = work / ".snakemake" / "scripts"
    return {p.name for p in d.glob("tmp*.py")} if d.is_dir() else set()


def _job_pid(script: str) -> int | None:
    """PID of the job process running `.snakemake/scripts/<script>`, if any."""
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if script.encode() in (entry / "cmdline").read_bytes():
                    return int(entry.name)
            except OSError:
                continue
    return None


class Chain:
    """The same command, started again whenever a fault (or the harness) ended it."""

    def __init__(self, cmd, work: Path):
        self.cmd, self.work, self.proc, self.starts = cmd, work, None, 0
        self.seen: set[str] = set()

    def start(self, extra=()):
        self.seen = _scripts(self.work)
        self.proc = subprocess.Popen([*self.cmd, *extra], cwd=self.work, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL, start_new_session=True)
        self.starts += 1

    def kill(self):
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
        if self.proc is not None:
            self.proc.wait()
        self.proc = None

    def wait_job(self, rule: str, timeout: float = 180) -> str | None:
        """Name of the next new script file of a `rule` job; None if the run ended first."""
        deadline = time.time() + timeout
        while time.time() < deadline:
            new = {n for n in _scripts(self.work) - self.seen if n.endswith(f".{rule}.py")}
            if new:
                name = sorted(new)[0]
                self.seen.add(name)
                return name
            if self.proc.poll() is not None:
                return None
            time.sleep(0.03)
        raise AssertionError(f"no {rule} job within {timeout} s")


def _copy_columns(sql: str) -> list[str]:
    line = next(ln for ln in sql.splitlines() if ln.lstrip().lower().startswith("\\copy"))
    return [c.strip().strip('"') for c in line.split("(", 1)[1].split(")", 1)[0].split(",")]


def test_kill_and_disk_full_then_rerun_is_exact(tmp_path, sample_nc, pg_server, pg_conn):
    if os.geteuid() != 0:
        pytest.skip("mounts a tmpfs to fill the disk, which needs root (CI runs it as root)")
    work = _workdir(tmp_path)
    with xr.open_dataset(sample_nc, decode_times=False) as ds:
        small = ds.isel(time=slice(0, N_TIME), latitude=slice(0, NY), longitude=slice(0, NX))
        small.to_netcdf(work / "small.nc")
        data = small["air_temperature"].values
    pg_conn.execute(f"DROP TABLE IF EXISTS {TABLE}")
    cfg = {"input": "small.nc", "run": RUN, "table": TABLE, "frames_per_shard": 4,
           "width": 64, "height": 48, "dpi": 20, "calibration_frames": 2,
           "preset": "ultrafast",
           "database": {"url": f"postgresql:///postgres?host={pg_server['host']}"
                               "&user=postgres"}}
    (work / "run.yaml").write_text(json.dumps(cfg))
    cmd = [sys.executable, "-m", "snakemake", "--cores", "2", "--configfile", "run.yaml"]
    results = work / "results"
    results.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64m", "tmpfs", str(results)],
                   check=True)
    hits: dict[str, int] = dict.fromkeys(RULES, 0)
    full: list[str] = []
    # Per rule: kill -9 of one job (Snakemake retries it), of the whole run (the same
    # command is started again), and of a job again; the delay after the job's start is
    # drawn from the seed.
    faults = [(rule, kind) for rule in RULES for kind in ("job", "run", "job")]
    chain = Chain(cmd, work)
    try:
        chain.start()
        for seed, (rule, kind) in zip(SEEDS, faults, strict=True):
            # Short jobs (a copy, a join, a load of a few rows) end within a second: their
            # kills land in the first 0.3 s of the job, the others' anywhere in the first 1 s.
            delay = random.Random(seed).uniform(0.0, 1.0 if rule in LONG_RULES else 0.3)
            if rule == "process_shard" and "process_shard" not in full:
                chain.kill()  # calibration done, shards pending: fill the disk while one writes
                subprocess.run([*cmd, "--until", "calibrate_render"], cwd=work, check=True,
                               capture_output=True)
                # The run fits when it starts (it checks before any job); another user's
                # files take the space once a shard job has started.
                r = _fill_during(work, cmd, "process_shard", results)
                assert r.returncode != 0
                assert any("no space left on device" in p.read_text(errors="replace") for p in
                           (work / "logs" / RUN / "process_shard").glob("*.log")), r.stderr
                # Nothing partial under a final name: a shard's COPY file, if there, is whole
                # (a job stopped mid-write may leave a .part, which the rerun removes).
                for done in (results / RUN / "cells").glob("*.copy"):
                    assert len(done.read_bytes().splitlines()) == 4 * NY * NX, done
                full.append("process_shard")
                (results / FILLER).unlink()
                chain.start()
            if rule == "reduce_cells" and "reduce_cells" not in full:
                chain.kill()  # all shards done, reduce pending: fill the disk during it
                subprocess.run([*cmd, "--until", "process_shard", "preview"], cwd=work,
                               check=True, capture_output=True)
                # A joined file of an earlier reduce would be freed by the forced rerun.
                (results / RUN / "cells.copy").unlink(missing_ok=True)
                # Only the reduce (forced: the run may have reduced already): other pending
                # jobs (the report's pictures) would take the space first.
                r = _fill_during(work, [*cmd[:3], f"results/{RUN}/cells.copy", "--forcerun",
                                        "reduce_cells", *cmd[3:]], "reduce_cells", results)
                assert r.returncode != 0
                log = work / f"logs/{RUN}/reduce_cells.log"
                said = r.stderr + (log.read_text() if log.exists() else "")
                assert "no space left on device" in said, r.stderr[-3000:]
                assert "Traceback" not in said, said[-3000:]
                assert not (results / RUN / "cells.copy").exists(), "partial COPY file kept"
                full.append("reduce_cells")
                (results / FILLER).unlink()
                chain.start()
            name = chain.wait_job(rule)
            for _ in range(4):
                if name is not None:
                    break
                # The run ended: a job killed twice failed it (start the same command
                # again), or the rule's job already ran in parallel with another rule's
                # (force it, so that this fault still hits it).
                chain.start(["--forcerun", rule] if chain.proc.returncode == 0 else [])
                name = chain.wait_job(rule)
            assert name is not None, f"seed {seed}: no {rule} job to kill"
            time.sleep(delay)
            if kind == "job":
                pid = _job_pid(name)
                for _ in range(3):  # the job ended before the kill: force it again
                    if pid is not None:
                        break
                    chain.kill()
                    chain.start(["--forcerun", rule])
                    name = chain.wait_job(rule)
                    pid = _job_pid(name) if name is not None else None
                if pid is not None:
                    os.kill(pid, signal.SIGKILL)
                    hits[rule] += 1
            else:
                hits[rule] += chain.proc.poll() is None
                chain.kill()
                chain.start()
        chain.proc.wait()
        final = subprocess.run(cmd, cwd=work, capture_output=True, text=True)
        assert final.returncode == 0, final.stderr[-3000:]
        out = results / RUN
        assert not list(results.rglob("*.part")), "a .part file outlived the rerun"
        # The COPY file: every cell and step exactly once, values exact.
        names = _copy_columns((out / "cells.sql").read_text())
        ti, ci, vi = (names.index(c) for c in ("time_index", "cell_id", "value"))
        rows = [ln.split("\t") for ln in (out / "cells.copy").read_text().splitlines()]
        assert len(rows) == N_TIME * NY * NX
        got = np.array([[int(r[ti]), int(r[ci])] for r in rows])
        want_t, want_c = np.divmod(np.arange(N_TIME * NY * NX), NY * NX)
        assert (got[:, 0] == want_t).all() and (got[:, 1] == want_c).all()
        values = np.array([float(r[vi]) for r in rows], dtype=np.float32)
        assert np.array_equal(values, data.reshape(-1))
        # The database: the same rows, once.
        db = pg_conn.execute(f"SELECT time_index, cell_id, value FROM {TABLE} WHERE run = %s "
                             "ORDER BY time_index, cell_id", (RUN,)).fetchall()
        assert len(db) == N_TIME * NY * NX
        assert np.array_equal(np.array([v for _, _, v in db], dtype=np.float32),
                              data.reshape(-1))
        assert [(t, c) for t, c, _ in db] == list(zip(want_t.tolist(), want_c.tolist(),
                                                      strict=True))
        # The movie: every frame, decodable.
        probe = json.loads(subprocess.run(
            ["ffprobe", "-v", "error", "-count_frames", "-select_streams", "v:0",
             "-show_entries", "stream=nb_read_frames", "-of", "json", str(out / "movie.mp4")],
            check=True, capture_output=True, text=True).stdout)
        assert int(probe["streams"][0]["nb_read_frames"]) == N_TIME
        assert not [p for p in out.rglob("*") if p.suffix in (".part", ".tmp")]
    finally:
        chain.kill()
        subprocess.run(["umount", "-l", str(results)], check=False)
    injected = sum(hits.values())
    print(f"reliability: kills={injected} disk_full={len(full)} starts={chain.starts} "
          f"rules={hits}")
    assert injected >= 20 and all(hits.values()), hits
    assert full == ["process_shard", "reduce_cells"]
