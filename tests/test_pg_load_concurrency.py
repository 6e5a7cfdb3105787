"""Loading into a table others use: concurrency, quoting, kill and resume, lost connection.

Every test runs against the real PostgreSQL of ``pg_server``. A load's COPY source is a
named pipe (FIFO) the test writes to, so the test decides when a load is mid-COPY, with its
transaction open: overlaps are certain, not a matter of timing luck.
"""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import psycopg
import pytest
from ncreel.core.errors import NcreelError
from ncreel.pg.copytext import write_copy_rows
from ncreel.pg.load import _stage_names, load_copy
from ncreel.pg.sql import load_script

ROOT = Path(__file__).resolve().parents[1]
COLS = [("cell_id", "bigint"), ("value", "real"), ("label", "text")]


def _rows(n: int, start: int = 0) -> bytes:
    buf = io.BytesIO()
    write_copy_rows(buf, {"cell_id": np.arange(start, start + n),
                          "value": np.linspace(0, 1, n, dtype=np.float32), "label": ["x"] * n})
    return buf.getvalue()


class Pipe:
    """A FIFO a load reads its COPY text from; :meth:`feed` writes it (in a thread)."""

    def __init__(self, path: Path):
        self.path = path
        os.mkfifo(path)
        self.thread = None
        self.opened = threading.Event()  # the load has opened the pipe and is reading it

    def feed(self, data: bytes, *, close: bool = True, hold: threading.Event | None = None):
        self.opened.clear()

        def run():
            with open(self.path, "wb") as fh:  # blocks until the load opens the pipe
                self.opened.set()
                fh.write(data)
                fh.flush()
                if hold is not None:
                    hold.wait(60)
        self.thread = threading.Thread(target=run, daemon=True)
        self.thread.start()
        return self


def _count(conn, table: str, run: str | None = None) -> int:
    q = psycopg.sql.SQL("SELECT count(*) FROM {}").format(psycopg.sql.Identifier(table))
    if run is not None:
        q += psycopg.sql.SQL(" WHERE run = {}").format(psycopg.sql.Literal(run))
    return conn.execute(q).fetchone()[0]


def _wait_copies(conn, n: int, timeout: float = 15, *, active_s: float = 0.0) -> None:
    """Wait until `n` sessions are inside a COPY (their load transactions open).

    With `active_s`, only COPYs running for at least that long count: one held by its
    source (a FIFO), not a short file's that may end before it is acted on.
    """
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        busy = conn.execute("SELECT count(*) FROM pg_stat_activity WHERE query ILIKE 'COPY%%' "
                            "AND state = 'active' AND pid <> pg_backend_pid() AND "
                            "now() - query_start >= make_interval(secs => %s)",
                            [active_s]).fetchone()[0]
        if busy >= n:
            return
        time.sleep(0.02)
    raise AssertionError(f"{n} loads did not reach COPY within {timeout} s")


def _psql(pg_server, cwd: Path) -> subprocess.Popen:
    return subprocess.Popen(["psql", "-X", "-q", "-h", pg_server["host"], "-U", "postgres",
                             "-d", "postgres", "-f", "cells.sql"], cwd=cwd,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


class Loader:
    """One load of `run` from a FIFO, through psql + cells.sql or through load_copy."""

    def __init__(self, how: str, pg_server, base: Path, table: str, run: str, n: int):
        self.how, self.run, self.n = how, run, n
        d = base / run
        d.mkdir(parents=True)
        self.pipe = Pipe(d / "cells.copy")
        self.hold = threading.Event()
        self.pipe.feed(_rows(n), hold=self.hold)
        if how == "psql":
            (d / "cells.sql").write_text(load_script(table, COLS, "cells.copy", run=run))
            self.proc = _psql(pg_server, d)
        else:
            self.result = {}

            def run_load():
                try:
                    self.result["summary"] = load_copy(self.pipe.path,
                                                       conninfo=pg_server["conninfo"],
                                                       table=table, run=run, columns=COLS)
                except Exception as err:  # noqa: BLE001 - reported by finish()
                    self.result["error"] = err
            self.proc = threading.Thread(target=run_load, daemon=True)
            self.proc.start()

    def finish(self) -> None:
        self.hold.set()
        if self.how == "psql":
            out, err = self.proc.communicate(timeout=60)
            assert self.proc.returncode == 0 and not err.strip(), err
        else:
            self.proc.join(60)
            assert "error" not in self.result, self.result.get("error")
            assert self.result["summary"]["rows"] == self.n


@pytest.mark.parametrize("how", ["psql", "rule"])
def test_reader_of_another_run_is_not_blocked(pg_server, pg_conn, tmp_path, how):
    table = f"t_reader_{how}"
    Loader(how, pg_server, tmp_path / "0", table, "other", 50).finish()
    Loader(how, pg_server, tmp_path / "0", table, "run_a", 30).finish()
    load = Loader(how, pg_server, tmp_path / "1", table, "run_a", 40)
    _wait_copies(pg_conn, 1)
    with psycopg.connect(pg_server["conninfo"], autocommit=True) as reader:
        reader.execute("SET lock_timeout = '5s'")
        t = time.perf_counter()
        n_other = _count(reader, table, "other")
        waited = time.perf_counter() - t
        n_a = _count(reader, table, "run_a")  # the reloaded run: still its old rows
    load.finish()
    print(f"reader waited {waited * 1000:.1f} ms during a {how} load")
    assert (n_other, n_a) == (50, 30)
    assert waited < 1.0
    assert _count(pg_conn, table, "run_a") == 40


@pytest.mark.parametrize("how", ["psql", "rule"])
@pytest.mark.parametrize("existing", [False, True], ids=["new_table", "existing_table"])
def test_two_runs_load_at_once_first_time(pg_server, pg_conn, tmp_path, how, existing):
    for rep in range(5):
        table = f"t_race_{how}_{int(existing)}_{rep}"
        if existing:
            Loader(how, pg_server, tmp_path / f"{rep}-0", table, "first", 5).finish()
        loads = [Loader(how, pg_server, tmp_path / str(rep), table, run, n)
                 for run, n in (("a", 100), ("b", 200))]
        _wait_copies(pg_conn, 2)  # both transactions open and copying at the same time
        for load in loads:
            load.finish()  # each succeeded on its first attempt
        assert (_count(pg_conn, table, "a"), _count(pg_conn, table, "b")) == (100, 200)


@pytest.mark.parametrize("how", ["psql", "rule"])
def test_two_reruns_swap_at_once_without_deadlock(pg_server, pg_conn, tmp_path, how):
    """Both swaps need ACCESS EXCLUSIVE on the table: they queue, never deadlock."""
    table = f"t_reruns_{how}"
    for run in ("a", "b", "c"):
        Loader(how, pg_server, tmp_path / "0", table, run, 10).finish()
    loads = [Loader(how, pg_server, tmp_path / "1", table, run, n)
             for run, n in (("a", 100), ("b", 200))]
    _wait_copies(pg_conn, 2)  # both mid-COPY; both swap as soon as their COPY ends
    for load in loads:
        load.hold.set()
    for load in loads:
        load.finish()
    assert [_count(pg_conn, table, r) for r in "abc"] == [100, 200, 10]
    parts = pg_conn.execute("SELECT c.relname FROM pg_inherits i JOIN pg_class c ON "
                            "c.oid = i.inhrelid WHERE i.inhparent = %s::regclass ORDER BY 1",
                            (table,)).fetchall()
    assert parts == [(f"{table}${r}",) for r in "abc"]


def test_two_loads_of_one_run_queue_and_leave_one_copy(pg_server, pg_conn, tmp_path):
    """psql and the rule load the same run at once: the second waits for the first (the
    run's advisory lock), then replaces its partition; never two copies, never an error."""
    table = "t_same_run"
    Loader("rule", pg_server, tmp_path / "0", table, "a", 10).finish()
    first = Loader("psql", pg_server, tmp_path / "1", table, "a", 100)
    _wait_copies(pg_conn, 1)
    second = Loader("rule", pg_server, tmp_path / "2", table, "a", 200)
    end = time.monotonic() + 15
    while not pg_conn.execute("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' "
                              "AND NOT granted").fetchone()[0]:
        assert time.monotonic() < end, "the second load never waited for the first"
        time.sleep(0.02)
    assert _count(pg_conn, table, "a") == 10
    first.finish()
    second.finish()
    assert second.result["summary"]["replaced"] == 100
    assert _count(pg_conn, table, "a") == 200


def test_schema_table_and_long_run_names(pg_server, pg_conn, tmp_path):
    """Partitions live in the table's schema; a name over 63 bytes is shortened, not cut."""
    pg_conn.execute("CREATE SCHEMA IF NOT EXISTS climate")
    long_run = "r" * 60
    for how, run in (("psql", long_run), ("rule", "b.2-x")):
        Loader(how, pg_server, tmp_path / how, "climate.Cells", run, 5).finish()
    Loader("rule", pg_server, tmp_path / "again", "climate.Cells", long_run, 6).finish()
    got = pg_conn.execute("SELECT n.nspname, c.relname, pg_get_expr(c.relpartbound, c.oid) "
                          "FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid JOIN "
                          "pg_namespace n ON n.oid = c.relnamespace WHERE i.inhparent = "
                          "'climate.\"Cells\"'::regclass ORDER BY 2").fetchall()
    assert [(g[0], g[2]) for g in got] == [("climate", "FOR VALUES IN ('b.2-x')"),
                                           ("climate", f"FOR VALUES IN ('{long_run}')")]
    assert got[0][1] == "Cells$b.2-x" and got[1][1].startswith("Cells$rrr")
    assert len(got[1][1]) <= 63 and got[1][1] != f"Cells${long_run}"[:63]
    assert pg_conn.execute("SELECT count(*) FROM climate.\"Cells\" WHERE run = %s",
                           (long_run,)).fetchone()[0] == 6


@pytest.mark.parametrize("table", ["select", "MixedCase", 'we"ird name'])
def test_reserved_and_mixed_case_names_load(pg_server, pg_conn, tmp_path, table):
    for how in ("psql", "rule"):
        Loader(how, pg_server, tmp_path / how, table, how, 7).finish()
    assert _count(pg_conn, table, "psql") == 7 and _count(pg_conn, table, "rule") == 7


@pytest.mark.parametrize("how", ["psql", "rule"])
def test_reader_does_not_queue_behind_a_swap(pg_server, pg_conn, tmp_path, how):
    """A long query holds the table; a rerun's swap must wait, new readers must not.

    PostgreSQL queues a lock request behind a waiting stronger one, so a swap that simply
    waited for ACCESS EXCLUSIVE would stall every later reader until the long query ends.
    """
    table = f"t_queue_{how}"
    Loader("rule", pg_server, tmp_path / "0", table, "other", 50).finish()
    Loader("rule", pg_server, tmp_path / "0", table, "run_a", 30).finish()
    with psycopg.connect(pg_server["conninfo"]) as long_reader:
        assert _count(long_reader, table, "other") == 50  # its transaction stays open
        load = Loader(how, pg_server, tmp_path / "1", table, "run_a", 40)
        load.hold.set()  # the COPY ends at once; then the swap tries for its lock
        end = time.monotonic() + 15
        # The swap's DO block (its start: the activity view keeps 1024 bytes of a query).
        while not pg_conn.execute("SELECT count(*) FROM pg_stat_activity WHERE query LIKE "
                                  "'DO %DECLARE old regclass;%' AND pid <> pg_backend_pid()"
                                  ).fetchone()[0]:
            assert time.monotonic() < end, "the swap never started"
            time.sleep(0.01)
        waits = []
        with psycopg.connect(pg_server["conninfo"], autocommit=True) as reader:
            reader.execute("SET lock_timeout = '5s'")
            for _ in range(20):
                t = time.perf_counter()
                assert _count(reader, table, "other") == 50
                assert _count(reader, table, "run_a") == 30  # not swapped yet
                waits.append(time.perf_counter() - t)
                time.sleep(0.01)
        long_reader.rollback()  # the long query ends: now the swap goes through
        load.finish()
    print(f"readers waited at most {max(waits) * 1000:.1f} ms while a swap waited")
    assert max(waits) < 0.2
    assert _count(pg_conn, table, "run_a") == 40
    if how == "rule":  # the time it gave way is reported, the lock's time is not in it
        summary = load.result["summary"]
        assert summary["swap_wait_seconds"] > 0.2 > summary["swap_seconds"]


_KILLABLE = """
import json, sys
sys.path.insert(0, {workflow!r})
from ncreel.pg.load import load_copy
print(json.dumps(load_copy({files!r}, conninfo={conninfo!r}, table={table!r}, run="r",
                           columns={cols!r}, jobs={jobs})))
"""


def _start_load(pg_server, files, table, jobs):
    code = _KILLABLE.format(workflow=str(ROOT / "workflow"), files=[str(f) for f in files],
                            conninfo=pg_server["conninfo"], table=table, cols=COLS, jobs=jobs)
    return subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


@pytest.mark.parametrize("jobs", [1, 2])
def test_kill_midway_then_rerun_leaves_one_copy(pg_server, pg_conn, tmp_path, jobs):
    table = f"t_kill_{jobs}"
    files = []
    for i in range(3):
        files.append(tmp_path / f"{i}.copy")
        files[-1].write_bytes(_rows(100, 100 * i))
    fifo = Pipe(tmp_path / "3.copy")
    data3 = _rows(100, 300)
    load_copy(files, conninfo=pg_server["conninfo"], table=table, run="r", columns=COLS)
    assert _count(pg_conn, table, "r") == 300  # an earlier, complete load of the run

    stuck = threading.Event()
    fifo.feed(data3[: len(data3) // 2], hold=stuck)  # never completes
    proc = _start_load(pg_server, [*files, fifo.path], table, jobs)
    _wait_copies(pg_conn, 1)
    stage, staged = _stage_names(table, "r")
    if jobs > 1:  # wait until the three regular files are staged and committed
        q = psycopg.sql.SQL("SELECT count(*) FROM {}").format(psycopg.sql.Identifier(*staged))
        end = time.monotonic() + 30
        while pg_conn.execute(q).fetchone()[0] < 3:
            assert time.monotonic() < end, proc.stderr
            time.sleep(0.05)
    # Kill it while it reads the pipe: killed earlier, the writer would still wait for a
    # reader and then feed the rerun's pipe too.
    assert fifo.opened.wait(30), "the load never opened the pipe"
    proc.send_signal(signal.SIGKILL)
    proc.wait(30)
    proc.stdout.close()
    proc.stderr.close()
    stuck.set()  # close the old writer: the rerun's pipe must start empty
    fifo.thread.join(30)
    assert _count(pg_conn, table, "r") == 300  # old rows only: nothing partial visible
    # The old partition is still the run's one and only partition: nothing half-attached.
    parts = pg_conn.execute("SELECT c.relname FROM pg_inherits i JOIN pg_class c ON "
                            "c.oid = i.inhrelid WHERE i.inhparent = %s::regclass",
                            (table,)).fetchall()
    assert parts == [(f"{table}$r",)]

    fifo.feed(data3)
    proc = _start_load(pg_server, [*files, fifo.path], table, jobs)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    summary = json.loads(out.strip().splitlines()[-1])
    assert summary["rows"] == 400 and summary["replaced"] == 300
    assert summary["resumed"] == (3 if jobs > 1 else 0)  # staged files were not reloaded
    ids = [r[0] for r in pg_conn.execute(psycopg.sql.SQL("SELECT cell_id FROM {} ORDER BY 1")
                                         .format(psycopg.sql.Identifier(table)))]
    assert ids == list(range(400))  # exactly one copy
    # This run's staging and bookkeeping tables are gone (other tests' may remain).
    leftovers = pg_conn.execute("SELECT count(*) FROM pg_class WHERE relname = ANY(%s)",
                                [[stage[-1], staged[-1]]]).fetchone()[0]
    assert leftovers == 0


def _load_until_lost(conninfo: str, files, jobs: int, cut) -> str:
    """Start a load whose last file is a FIFO, call `cut()` mid-COPY, return the error."""
    fifo = Pipe(files[-1])
    hold = threading.Event()
    fifo.feed(_rows(10, 10)[:50], hold=hold)
    result = {}

    def run():
        try:
            load_copy(files, conninfo=conninfo, table="t_lost", run="r", columns=COLS,
                      jobs=jobs)
        except NcreelError as err:
            result["err"] = str(err)
    t = threading.Thread(target=run)
    t.start()
    with psycopg.connect(conninfo, autocommit=True) as conn:
        # The FIFO's COPY, held mid-row: with two connections the other file's COPY may
        # be the one seen, and end before the cut (then the FIFO's row ended cut short).
        _wait_copies(conn, 1, active_s=0.5)
    cut()
    hold.set()
    t.join(60)
    return result["err"]


@pytest.mark.parametrize("jobs", [1, 2])
def test_lost_connection_reports_the_server_reason(pg_server, tmp_path, jobs):
    """The server shuts down mid-load (1 connection) / the backend is terminated (2)."""
    from pgserver import start_server

    files = [tmp_path / "0.copy", tmp_path / "1.copy"]
    files[0].write_bytes(_rows(10))
    if jobs == 1:
        info, stop = start_server()
        try:
            msg = _load_until_lost(info["conninfo"], files, jobs, lambda: subprocess.run(
                [*info["pg_ctl"], "-m", "fast", "-w", "stop"], check=True,
                capture_output=True))
        finally:
            stop()
    else:
        def terminate():
            with psycopg.connect(pg_server["conninfo"], autocommit=True) as conn:
                conn.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE "
                             "query ILIKE 'COPY%' AND pid <> pg_backend_pid()")
        msg = _load_until_lost(pg_server["conninfo"], files, jobs, terminate)
    print(msg)
    assert "connection lost" in msg and "terminating connection" in msg, msg
    assert "the connection is lost" not in msg and "rerun" in msg
    assert "host=" in msg and "\n" not in msg


def test_rule_script_reports_one_error_line(pg_server, tmp_path, monkeypatch):
    """The load_database adapter turns a failed load into one ``ncreel: error:`` line."""
    import atexit
    import runpy

    at_exit = []  # the job's end record, run here instead of at the interpreter's exit
    monkeypatch.setattr(atexit, "register", at_exit.append)
    from types import SimpleNamespace

    f = tmp_path / "cells.copy"
    f.write_bytes(_rows(3))
    smk = SimpleNamespace(
        scriptdir=str(ROOT / "workflow/scripts"), log=[str(tmp_path / "load.log")],
        input=SimpleNamespace(table=str(f), rows=[str(f)]),
        output=SimpleNamespace(summary=str(tmp_path / "load.json")),
        params=SimpleNamespace(conninfo=f"host={pg_server['host']} port=1 user=postgres",
                               table="t", run="r", columns=COLS, jobs=1, layout="wide"),
        rule="load_database", wildcards={}, threads=1, resources={"mem_mb": 400, "runtime": 60})
    with pytest.raises(SystemExit) as exit_:
        runpy.run_path(str(ROOT / "workflow/scripts/load_database.py"),
                       init_globals={"snakemake": smk})
    msg = str(exit_.value.code)
    assert msg.startswith("ncreel: error: database (") and "cannot connect" in msg, msg
    assert "\n" not in msg and not (tmp_path / "load.json").exists()
    # The attempt is recorded as failed (sys.exit bypasses the excepthook).
    from ncreel.run import jobrecord

    assert jobrecord._FAILED and jobrecord.read_attempts(
        jobrecord.attempts_path(tmp_path / "load.log"))[-1]["mem_mb"] == 400
    # (an extension module imported on the way may register its own exit hook)
    [end] = [f for f in at_exit if getattr(f, "__qualname__", "") == "record_attempt.<locals>.end"]
    end()
    records = (tmp_path / "load.log.attempts.jsonl").read_text().splitlines()
    assert json.loads(records[-1])["event"] == "end" and not json.loads(records[-1])["ok"]
    jobrecord._FAILED.clear()  # as a new job process starts
