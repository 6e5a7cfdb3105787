"""load_database: psycopg COPY into a real PostgreSQL server, idempotent per run."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from cells_data import write_risk_nc
from ncreel.core.errors import NcreelError
from ncreel.pg.copytext import concatenate, open_copy_writer, write_copy_rows
from ncreel.pg.load import conninfo_for, job_conninfo, load_copy, safe_conninfo
from ncreel.pg.sql import load_script

ROOT = Path(__file__).resolve().parents[1]
COLS = [("cell_id", "bigint"), ("value", "real"), ("label", "text")]


def _write(path, n, start=0, compression="none"):
    with open_copy_writer(path, compression) as fh:
        write_copy_rows(fh, {"cell_id": np.arange(start, start + n),
                             "value": np.linspace(0, 1, n, dtype=np.float32),
                             "label": ["a\tb"] * n})
    return path


def _count(conn, table, run=None):
    q = f"SELECT count(*) FROM {table}" + (" WHERE run = %s" if run else "")
    return conn.execute(q, (run,) if run else ()).fetchone()[0]


def _partitions(conn, table):
    """{run: partition name} of `table` (a table partitioned by LIST (run))."""
    return {r[1].split("'")[1]: r[0] for r in conn.execute(
        "SELECT c.relname, pg_get_expr(c.relpartbound, c.oid) FROM pg_inherits i "
        "JOIN pg_class c ON c.oid = i.inhrelid WHERE i.inhparent = %s::regclass", (table,))}


def _dead_and_deleted(conn, table, inserted):
    """Dead tuples and deleted rows over `table` and its partitions (server statistics).

    Waits until the counts include `inserted` rows inserted: loading backends report
    their counts a little after their transactions end.
    """
    end = time.monotonic() + 20
    while True:
        conn.execute("SELECT pg_stat_clear_snapshot()")
        ins, dead, deleted = conn.execute(
            "SELECT coalesce(sum(n_tup_ins), 0), coalesce(sum(n_dead_tup), 0), "
            "coalesce(sum(n_tup_del), 0) FROM pg_stat_user_tables WHERE relid = %s::regclass "
            "OR relid IN (SELECT inhrelid FROM pg_inherits WHERE inhparent = %s::regclass)",
            (table, table)).fetchone()
        if ins >= inserted:
            return dead, deleted
        assert time.monotonic() < end, f"{table}: {ins} of {inserted} inserts reported"
        time.sleep(0.1)


def test_load_is_idempotent_per_run(pg_server, pg_conn, tmp_path):
    f = _write(tmp_path / "cells.copy", 1000)
    info = pg_server["conninfo"]
    s1 = load_copy(f, conninfo=info, table="t_idem", run="a", columns=COLS, block_bytes=4096)
    assert s1["rows"] == 1000 and s1["replaced"] == 0 and s1["partition"] == "t_idem$a"
    s2 = load_copy(f, conninfo=info, table="t_idem", run="a", columns=COLS)
    assert s2["rows"] == 1000 and s2["replaced"] == 1000
    load_copy(_write(tmp_path / "b.copy", 10), conninfo=info, table="t_idem", run="b",
              columns=COLS)
    assert _count(pg_conn, "t_idem", "a") == 1000 and _count(pg_conn, "t_idem", "b") == 10
    assert pg_conn.execute("SELECT label FROM t_idem LIMIT 1").fetchone()[0] == "a\tb"
    # One partition per run, LIST (run); the rerun replaced run a's partition.
    assert pg_conn.execute("SELECT pg_get_partkeydef('t_idem'::regclass)").fetchone()[0] \
        == "LIST (run)"
    assert _partitions(pg_conn, "t_idem") == {"a": "t_idem$a", "b": "t_idem$b"}


def test_rerun_replaces_the_partition_without_dead_rows(pg_server, pg_conn, tmp_path):
    """No DELETE: after a rerun the table and its partitions hold no dead tuples."""
    info = pg_server["conninfo"]
    f = _write(tmp_path / "cells.copy", 5000)
    load_copy(f, conninfo=info, table="t_dead", run="a", columns=COLS)
    old = pg_conn.execute("SELECT '\"t_dead$a\"'::regclass::oid").fetchone()[0]
    load_copy(_write(tmp_path / "other.copy", 10), conninfo=info, table="t_dead", run="b",
              columns=COLS)
    s = load_copy(f, conninfo=info, table="t_dead", run="a", columns=COLS)
    assert s["replaced"] == 5000 and _count(pg_conn, "t_dead", "a") == 5000
    new = pg_conn.execute("SELECT '\"t_dead$a\"'::regclass::oid").fetchone()[0]
    assert new != old  # a new table, the old one dropped
    assert pg_conn.execute("SELECT count(*) FROM pg_class WHERE oid = %s", (old,)
                           ).fetchone()[0] == 0
    from ncreel.pg.sql import run_tables

    left = [n[-1] for k, n in run_tables("t_dead", "a").items() if k != "partition"]
    assert pg_conn.execute("SELECT count(*) FROM pg_class WHERE relname = ANY(%s)", (left,)
                           ).fetchone()[0] == 0  # no new, old or staging table left
    # The loading backends have exited, so their statistics are flushed.
    assert _dead_and_deleted(pg_conn, "t_dead", 5010) == (0, 0)
    # COPY FREEZE: every page of the one-connection load is all-frozen already.
    pg_conn.execute("CREATE EXTENSION IF NOT EXISTS pg_visibility")
    frozen, pages = pg_conn.execute(
        "SELECT (pg_visibility_map_summary('\"t_dead$a\"')).all_frozen, "
        "pg_relation_size('\"t_dead$a\"') / current_setting('block_size')::int").fetchone()
    assert pages > 1 and frozen == pages


def test_parallel_load_resumes_only_from_the_same_files(pg_server, pg_conn, tmp_path):
    """jobs > 1: a failed load keeps the files it staged (not attached); a rerun with the
    same files resumes after them, with changed files it starts again."""
    info = pg_server["conninfo"]
    files = [_write(tmp_path / f"{i}.copy", 10, 10 * i) for i in range(3)]
    good = files[2].read_bytes()
    files[2].write_bytes(good + b"x\t1\ty\n")
    with pytest.raises(NcreelError, match="staging .*2.copy for t_resume failed, nothing changed"):
        load_copy(files, conninfo=info, table="t_resume", run="r", columns=COLS, jobs=2)
    assert _partitions(pg_conn, "t_resume") == {}  # nothing attached
    files[2].write_bytes(good)
    s = load_copy(files, conninfo=info, table="t_resume", run="r", columns=COLS, jobs=2)
    assert (s["rows"], s["resumed"]) == (30, 2) and _count(pg_conn, "t_resume", "r") == 30
    files[2].write_bytes(good + b"x\t1\ty\n")
    with pytest.raises(NcreelError):
        load_copy(files, conninfo=info, table="t_resume", run="r", columns=COLS, jobs=2)
    _write(files[0], 5, 100)  # a changed shard file: what was staged is obsolete
    files[2].write_bytes(good)
    s = load_copy(files, conninfo=info, table="t_resume", run="r", columns=COLS, jobs=2)
    assert (s["rows"], s["resumed"], s["replaced"]) == (25, 0, 30)
    ids = [r[0] for r in pg_conn.execute("SELECT cell_id FROM t_resume ORDER BY 1")]
    assert ids == [*range(10, 30), *range(100, 105)]


def test_attach_needs_no_validation_scan(pg_server, pg_conn, tmp_path):
    """The new table's CHECK matches the bound: PostgreSQL says the scan is skipped."""
    from ncreel.pg.sql import (
        copy_statement,
        create_statement,
        load_statements,
        run_tables,
        swap_statement,
    )

    pg_conn.execute(create_statement("t_scan", COLS))
    notices = []
    with psycopg_connect(pg_server) as conn:
        conn.add_notice_handler(lambda d: notices.append(d.message_primary))
        with conn.transaction(), conn.cursor() as cur:
            for stmt in load_statements("t_scan", COLS, "r"):
                cur.execute(stmt)
            with cur.copy(copy_statement(run_tables("t_scan", "r")["stage"], COLS,
                                         freeze=True)) as copy:
                copy.write(_write(tmp_path / "c.copy", 50).read_bytes())
            cur.execute("SET LOCAL client_min_messages = debug1")
            cur.execute(swap_statement("t_scan", "r"))
    assert any("is implied by existing constraints" in n for n in notices), notices
    assert _count(pg_conn, "t_scan", "r") == 50


def test_old_partition_left_by_a_kill_after_the_swap_is_dropped_next_time(pg_server, pg_conn,
                                                                           tmp_path):
    """Killed after the swap's commit, before the DROP: the run is whole; the next load
    drops the detached table."""
    from ncreel.pg.sql import copy_statement, load_statements, run_tables, swap_statement

    f = _write(tmp_path / "c.copy", 30)
    load_copy(f, conninfo=pg_server["conninfo"], table="t_after", run="r", columns=COLS)
    with psycopg_connect(pg_server) as conn:
        with conn.transaction(), conn.cursor() as cur:
            for stmt in load_statements("t_after", COLS, "r"):
                cur.execute(stmt)
            with cur.copy(copy_statement(run_tables("t_after", "r")["stage"], COLS)) as copy:
                copy.write(f.read_bytes()[: f.read_bytes().index(b"\n", 100) + 1])
            cur.execute(swap_statement("t_after", "r"))
    old = run_tables("t_after", "r")["old"][-1]
    assert pg_conn.execute("SELECT relispartition FROM pg_class WHERE relname = %s",
                           (old,)).fetchone() == (False,)
    assert _count(pg_conn, "t_after", "r") < 30 and _count(pg_conn, old) == 30
    load_copy(f, conninfo=pg_server["conninfo"], table="t_after", run="r", columns=COLS)
    assert pg_conn.execute("SELECT count(*) FROM pg_class WHERE relname = %s", (old,)
                           ).fetchone()[0] == 0
    assert _count(pg_conn, "t_after", "r") == 30


def psycopg_connect(pg_server):
    import psycopg

    return psycopg.connect(pg_server["conninfo"], autocommit=True)


@pytest.mark.parametrize("compression", ["gzip", "zstd"])
def test_load_compressed_concatenated_shards(pg_server, pg_conn, tmp_path, compression):
    ext = {"gzip": ".gz", "zstd": ".zst"}[compression]
    parts = [_write(tmp_path / f"{i}.copy{ext}", 500, 500 * i, compression) for i in range(3)]
    out = tmp_path / f"cells.copy{ext}"
    concatenate(parts, out)
    s = load_copy(out, conninfo=pg_server["conninfo"], table=f"t_{compression}", run="r",
                  columns=COLS)
    assert s["rows"] == 1500
    ids = [r[0] for r in pg_conn.execute(f"SELECT cell_id FROM t_{compression}").fetchall()]
    assert ids == list(range(1500))


def test_failed_load_changes_nothing(pg_server, pg_conn, tmp_path):
    good = _write(tmp_path / "good.copy", 5)
    load_copy(good, conninfo=pg_server["conninfo"], table="t_fail", run="r", columns=COLS)
    bad = tmp_path / "bad.copy"
    bad.write_bytes(good.read_bytes() + b"not-a-number\t1\tx\n")
    with pytest.raises(NcreelError, match="nothing changed.*bigint"):
        load_copy(bad, conninfo=pg_server["conninfo"], table="t_fail", run="r", columns=COLS)
    assert _count(pg_conn, "t_fail", "r") == 5


def test_existing_table_with_other_columns_is_refused(pg_server, pg_conn, tmp_path):
    pg_conn.execute("CREATE TABLE t_other (run text NOT NULL, x int) PARTITION BY LIST (run)")
    with pytest.raises(NcreelError, match="exists with columns \\(run, x\\)"):
        load_copy(_write(tmp_path / "c.copy", 3), conninfo=pg_server["conninfo"],
                  table="t_other", run="r", columns=COLS)


def test_members_of_the_owning_role_replace_each_others_runs(pg_server, pg_conn, tmp_path):
    """Partitions belong to the table's owner: alice can replace the run bob loaded."""
    for role in ("cells_owner", "alice", "bob", "eve"):
        pg_conn.execute(f"CREATE ROLE {role} {'NOLOGIN' if role == 'cells_owner' else 'LOGIN'}")
    pg_conn.execute("CREATE SCHEMA shared AUTHORIZATION cells_owner")
    pg_conn.execute("GRANT cells_owner TO alice, bob")
    pg_conn.execute("GRANT USAGE, CREATE ON SCHEMA shared TO eve")
    f = _write(tmp_path / "c.copy", 4)

    def load(role, run):
        return load_copy(f, conninfo=pg_server["conninfo"].replace("user=postgres",
                                                                   f"user={role}"),
                         table="shared.cells", run=run, columns=COLS)
    from ncreel.pg.sql import create_statement

    pg_conn.execute(create_statement("shared.cells", COLS))  # made once, by an admin
    pg_conn.execute("ALTER TABLE shared.cells OWNER TO cells_owner")
    assert load("bob", "x")["replaced"] == 0
    assert load("alice", "x")["replaced"] == 4
    assert load("bob", "x")["replaced"] == 4
    owners = pg_conn.execute("SELECT DISTINCT relowner::regrole::text FROM pg_class WHERE oid "
                             "IN (SELECT inhrelid FROM pg_inherits WHERE inhparent = "
                             "'shared.cells'::regclass)").fetchall()
    assert owners == [("cells_owner",)]
    with pytest.raises(NcreelError, match='nothing changed: must be member of role "cells_owner"'):
        load("eve", "y")
    assert _count(pg_conn, "shared.cells") == 4


def test_table_of_an_older_ncreel_is_refused_with_what_to_do(pg_server, pg_conn, tmp_path):
    """A table holding every run (not partitioned): one line, by both load paths."""
    pg_conn.execute("CREATE TABLE t_older (run text NOT NULL, cell_id bigint, value real, "
                    "label text)")
    pg_conn.execute("INSERT INTO t_older VALUES ('old', 1, 0.5, 'x')")
    _write(tmp_path / "cells.copy", 3)
    with pytest.raises(NcreelError) as err:
        load_copy(tmp_path / "cells.copy", conninfo=pg_server["conninfo"], table="t_older",
                  run="r", columns=COLS)
    msg = str(err.value)
    assert "table t_older exists but is not partitioned by run" in msg and "\n" not in msg
    assert "RENAME" in msg and "config key 'table'" in msg
    (tmp_path / "cells.sql").write_text(load_script("t_older", COLS, "cells.copy", run="r"))
    r = subprocess.run(["psql", "-X", "-q", "-h", pg_server["host"], "-U", "postgres", "-d",
                        "postgres", "-f", "cells.sql"], cwd=tmp_path, capture_output=True,
                       text=True)
    assert r.returncode != 0 and "is not partitioned by run" in r.stderr
    assert _count(pg_conn, "t_older") == 1  # untouched


def test_table_named_like_another_tables_partition_is_refused_with_why(pg_server, tmp_path):
    # Table cells, run x has the partition cells$x; a run with table cells$x was told the
    # partition was "made by an older ncreel" and to rename it.
    f = _write(tmp_path / "c.copy", 3)
    load_copy(f, conninfo=pg_server["conninfo"], table="t_part", run="x", columns=COLS)
    with pytest.raises(NcreelError) as err:
        load_copy(f, conninfo=pg_server["conninfo"], table="t_part$x", run="y", columns=COLS)
    want = ("table t_part$x is a partition of table t_part (ncreel keeps each run of a table "
            "in a partition named <table>$<run>): set config key 'table' to another name")
    assert str(err.value) == want
    # cells.sql says the same through psql.
    (tmp_path / "cells.sql").write_text(load_script("t_part$x", COLS, "c.copy", run="y"))
    proc = subprocess.run(["psql", "-X", "-q", "-h", pg_server["host"], "-U", "postgres", "-d",
                           "postgres", "-f", "cells.sql"], cwd=tmp_path, capture_output=True,
                          text=True)
    assert proc.returncode != 0 and want in proc.stderr, proc.stderr


def test_documented_migration_moves_an_older_table(pg_server, pg_conn, tmp_path):
    """The SQL of docs/cells.md turns an older table into one partition per run."""
    text = (ROOT / "docs/cells.md").read_text()
    block = text[text.index("```sql\n-- migrate") + 7:]
    block = block[:block.index("```")]
    pg_conn.execute("CREATE TABLE cells (run text NOT NULL, cell_id bigint, value real, "
                    "label text)")
    pg_conn.execute("INSERT INTO cells SELECT r, i, i, 'x' FROM unnest(ARRAY['a', 'b.2']) r, "
                    "generate_series(1, 20) i")
    pg_conn.execute(block)
    assert _partitions(pg_conn, "cells") == {"a": "cells$a", "b.2": "cells$b.2"}
    assert _count(pg_conn, "cells", "b.2") == 20
    s = load_copy(_write(tmp_path / "c.copy", 7), conninfo=pg_server["conninfo"],
                  table="cells", run="a", columns=COLS)
    assert s["replaced"] == 20 and _count(pg_conn, "cells", "a") == 7


def test_server_older_than_postgresql_12_is_refused(pg_conn):
    from ncreel.pg.load import check_server_version

    check_server_version(pg_conn.info.server_version, "here")  # the test server passes
    with pytest.raises(NcreelError, match=r"^database \(here\): PostgreSQL 11.22 is too old: "
                       r".*needs PostgreSQL 12 or newer"):
        check_server_version(110022, "here")


def test_password_is_never_shown(pg_server, tmp_path, monkeypatch):
    url = "postgresql://bob:s3cr3t-pw@127.0.0.1:1/db"
    assert "s3cr3t" not in safe_conninfo(conninfo_for(url=url))
    monkeypatch.delenv("PGPASSWORD", raising=False)
    with pytest.raises(NcreelError, match="contains a password: put the password in") as err:
        job_conninfo(url=url)
    assert "s3cr3t" not in str(err.value) and "PGPASSWORD" not in os.environ
    assert job_conninfo(url="postgresql://bob@127.0.0.1:1/db") == conninfo_for(
        url="postgresql://bob@127.0.0.1:1/db")
    with pytest.raises(NcreelError) as err:
        load_copy(_write(tmp_path / "c.copy", 1), conninfo=conninfo_for(url=url), table="t",
                  run="r", columns=COLS)
    assert "cannot connect" in str(err.value) and "s3cr3t" not in str(err.value)
    with pytest.raises(NcreelError) as err:
        conninfo_for(url="postgresql://bob:s3cr3t@host/db?nosuchoption=1")
    assert "s3cr3t" not in str(err.value)
    with pytest.raises(NcreelError, match="exactly one"):
        conninfo_for(url=url, service="x")


def test_cells_sql_script_loads_with_psql(pg_server, pg_conn, tmp_path):
    _write(tmp_path / "cells.copy.zst", 20, compression="zstd")
    (tmp_path / "cells.sql").write_text(load_script("t_psql", COLS, "cells.copy.zst", run="x"))
    cmd = ["psql", "-X", "-q", "-h", pg_server["host"], "-U", "postgres", "-d", "postgres",
           "-f", "cells.sql"]
    for _ in range(2):  # rerun replaces
        subprocess.run(cmd, cwd=tmp_path, check=True, capture_output=True)
    assert _count(pg_conn, "t_psql", "x") == 20
    assert _partitions(pg_conn, "t_psql") == {"x": "t_psql$x"}
    assert _dead_and_deleted(pg_conn, "t_psql", 20) == (0, 0)


@pytest.mark.integration
def test_workflow_etr_risk_zstd_geometry_load(pg_server, pg_conn, tmp_path):
    nc = write_risk_nc(tmp_path / "risk.nc", n_time=8, ny=4, nx=5)
    url = f"postgresql://postgres@/postgres?host={pg_server['host']}"
    cfg = {"input": str(nc), "variable": "tas", "run": "etrtest", "frames_per_shard": 3,
           "width": 64, "height": 48, "dpi": 20, "table": "etr_cells",
           "cells": {"model": "etr_risk", "geometry": "text", "compression": "zstd",
                     "params": {"interception_variable": "intercept", "ec50_mg_kg": 0.5}},
           "database": {"url": url}}
    (tmp_path / "run.yaml").write_text(json.dumps(cfg))  # JSON is YAML
    shutil.copytree(ROOT / "config", tmp_path / "config")
    env = {**os.environ, "PYTHONPATH": str(ROOT / "workflow")}
    env["PGPASSWORD"] = "hunter2-pw"  # libpq's own source; the trust server ignores it
    for jobs in (1, 2):  # the second run is forced: rerun must replace, not duplicate
        cfg["database"]["jobs"] = jobs  # 2: the shard files over two connections
        (tmp_path / "run.yaml").write_text(json.dumps(cfg))
        r = subprocess.run([sys.executable, "-m", "snakemake", "--cores", "2", "--forceall",
                            "--directory", str(tmp_path), "--snakefile",
                            str(ROOT / "Snakefile"), "--configfile", "run.yaml"],
                           cwd=tmp_path, env=env, capture_output=True, text=True)
        assert r.returncode == 0, r.stderr[-3000:]
    out = tmp_path / "results/etrtest"
    summary = json.loads((out / "load.json").read_text())
    n = 8 * 20 - 0  # every tas cell is finite except one
    assert summary["rows"] == n - 1 and summary["replaced"] == n - 1
    assert summary["jobs"] == 2 and summary["files"] == 3  # 8 steps, 3 frames per shard
    assert _count(pg_conn, "etr_cells", "etrtest") == n - 1
    row = pg_conn.execute("SELECT geom, risk_class, time FROM etr_cells WHERE cell_id = 0 AND "
                          "time_index = 0").fetchone()
    assert row[0].startswith("SRID=4326;MULTIPOLYGON(((")
    assert row[1] in ("very low", "low", "medium", "high")
    assert (out / "cells.copy.zst").exists() and "zstd -dc" in (out / "cells.sql").read_text()
    # The password appears in no log, benchmark or Snakemake metadata file.
    for path in [*tmp_path.joinpath("logs").rglob("*"), *tmp_path.joinpath(".snakemake").rglob("*"),
                 *out.rglob("*.json"), *out.rglob("*.tsv"), out / "cells.sql"]:
        if path.is_file():
            assert b"hunter2" not in path.read_bytes(), path
    assert "hunter2" not in r.stderr and "hunter2" not in r.stdout


def test_load_into_a_sql_ascii_database(pg_server, pg_conn, tmp_path):
    """A database in SQL_ASCII, what initdb makes in the C locale (no LANG, as on many
    servers): psycopg reads its text as bytes unless the client asks for UTF8, and the load
    then refused the very table it had just created ("is relkind 'b'p''")."""
    pg_conn.execute("CREATE DATABASE ascii_db ENCODING 'SQL_ASCII' LC_COLLATE 'C' "
                    "LC_CTYPE 'C' TEMPLATE template0")
    info = pg_server["conninfo"].replace("dbname=postgres", "dbname=ascii_db")
    f = _write(tmp_path / "cells.copy", 50)
    s1 = load_copy(f, conninfo=info, table="t_ascii", run="a", columns=COLS)
    s2 = load_copy(f, conninfo=info, table="t_ascii", run="a", columns=COLS, jobs=2)
    assert (s1["rows"], s1["replaced"], s2["rows"], s2["replaced"]) == (50, 0, 50, 50)
    import psycopg

    with psycopg.connect(info, autocommit=True, client_encoding="UTF8") as conn:
        assert conn.execute("SHOW server_encoding").fetchone()[0] == "SQL_ASCII"
        assert conn.execute("SELECT count(*), min(label) FROM t_ascii WHERE run = 'a'"
                            ).fetchone() == (50, "a\tb")


def test_psql_script_loads_utf8_text_into_a_latin1_database_under_lang_c(pg_server, pg_conn,
                                                                        tmp_path):
    """cells.sql says the COPY file is UTF-8: psql under LANG=C would send its bytes as
    SQL_ASCII, and a LATIN1 database would keep 'Â°C' for '°C'."""
    import psycopg

    pg_conn.execute("DROP DATABASE IF EXISTS latin1db")
    pg_conn.execute("CREATE DATABASE latin1db ENCODING 'LATIN1' LC_COLLATE 'C' LC_CTYPE 'C' "
                    "TEMPLATE template0")
    with open_copy_writer(tmp_path / "c.copy", "none") as fh:
        write_copy_rows(fh, {"cell_id": np.arange(2), "value": np.zeros(2, np.float32),
                             "label": ["°C", "Zürich"]})
    (tmp_path / "cells.sql").write_text(load_script("t_latin1", COLS, "c.copy", run="r"))
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("LC_", "LANG", "PGCLIENTENCODING"))}
    env["LANG"] = "C"
    r = subprocess.run(["psql", "-X", "-q", "-h", pg_server["host"], "-U", "postgres", "-d",
                        "latin1db", "-f", "cells.sql"], cwd=tmp_path, capture_output=True,
                       text=True, env=env)
    assert r.returncode == 0, r.stderr
    conninfo = pg_server["conninfo"].replace("dbname=postgres", "dbname=latin1db")
    with psycopg.connect(conninfo) as conn:
        conn.execute("SET client_encoding = 'UTF8'")
        got = [row[0] for row in conn.execute("SELECT label FROM t_latin1 ORDER BY cell_id")]
    assert got == ["°C", "Zürich"]


def _left(conn, table: str, run: str) -> list[str]:
    """The tables a load of `run` into `table` makes while it runs, of those that exist."""
    from ncreel.pg.sql import run_tables

    names = run_tables(table, run)
    return [n for n in (names["stage"][-1], names["staged"][-1]) if conn.execute(
        "SELECT to_regclass(%s) IS NOT NULL", (f'"{n}"',)).fetchone()[0]]


@pytest.mark.parametrize("jobs", [1, 3])
def test_a_column_type_clash_is_one_line_before_loading(pg_server, pg_conn, tmp_path, jobs):
    # A float32 run (value real) and a packed-int16 run (value double precision) in one
    # table: found at the final ATTACH with PostgreSQL's raw message, which said "nothing
    # changed" while database.jobs: 3 left the ncreel_stage_* tables behind.
    table = f"t_types{jobs}"
    load_copy(_write(tmp_path / "a.copy", 4), conninfo=pg_server["conninfo"], table=table,
              run="float32", columns=COLS)
    packed = [("cell_id", "bigint"), ("value", "double precision"), ("label", "text")]
    files = [_write(tmp_path / f"s{i}.copy", 4, start=4 * i) for i in range(3)]
    with pytest.raises(NcreelError) as err:
        load_copy(files, conninfo=pg_server["conninfo"], table=table, run="packed",
                  columns=packed, jobs=jobs)
    msg = str(err.value)
    assert "\n" not in msg and (f"table {table} has column value of type real, but this run "
                                "writes double precision") in msg, msg
    assert _left(pg_conn, table, "packed") == [] and _count(pg_conn, table) == 4
    # The psql script says the same, and leaves nothing either.
    _write(tmp_path / "cells.copy", 4)
    (tmp_path / "cells.sql").write_text(load_script(table, packed, "cells.copy", run="p2"))
    proc = subprocess.run(["psql", "-X", "-q", "-h", pg_server["host"], "-U", "postgres", "-d",
                           "postgres", "-f", "cells.sql"], cwd=tmp_path, capture_output=True,
                          text=True)
    assert f"table {table} has column value of type real, but this run writes double " \
        "precision" in proc.stderr, proc.stderr
    assert _left(pg_conn, table, "p2") == [] and _count(pg_conn, table) == 4
