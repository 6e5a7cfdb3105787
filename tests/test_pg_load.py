"""load_database: psycopg COPY into a real PostgreSQL server, idempotent per run."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from cells_data import write_risk_nc
from ncreel.errors import NcreelError
from ncreel.pg.copytext import concatenate, load_script, open_copy_writer, write_copy_rows
from ncreel.pg.load import conninfo_for, job_conninfo, load_copy, safe_conninfo

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


def test_load_is_idempotent_per_run(pg_server, pg_conn, tmp_path):
    f = _write(tmp_path / "cells.copy", 1000)
    info = pg_server["conninfo"]
    s1 = load_copy(f, conninfo=info, table="t_idem", run="a", columns=COLS, block_bytes=4096)
    assert s1["rows"] == 1000 and s1["deleted"] == 0
    s2 = load_copy(f, conninfo=info, table="t_idem", run="a", columns=COLS)
    assert s2["rows"] == 1000 and s2["deleted"] == 1000
    load_copy(_write(tmp_path / "b.copy", 10), conninfo=info, table="t_idem", run="b",
              columns=COLS)
    assert _count(pg_conn, "t_idem", "a") == 1000 and _count(pg_conn, "t_idem", "b") == 10
    assert pg_conn.execute("SELECT label FROM t_idem LIMIT 1").fetchone()[0] == "a\tb"
    # run comes from the session's ncreel.run setting: no DDL during the load.
    assert pg_conn.execute("SELECT column_default FROM information_schema.columns WHERE "
                           "table_name = 't_idem' AND column_name = 'run'"
                           ).fetchone()[0] == "current_setting('ncreel.run'::text)"


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
    pg_conn.execute("CREATE TABLE t_other (run text, x int)")
    with pytest.raises(NcreelError, match="exists with columns \\(run, x\\)"):
        load_copy(_write(tmp_path / "c.copy", 3), conninfo=pg_server["conninfo"],
                  table="t_other", run="r", columns=COLS)


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
    assert summary["rows"] == n - 1 and summary["deleted"] == n - 1
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
