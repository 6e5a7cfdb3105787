"""The reduce step (``ncreel.pg.reduce``): shard COPY files joined in order, and the script."""

import gzip

import pytest
from ncreel.pg.copytext import open_copy_writer
from ncreel.pg.reduce import reduce_cells
from workflow_run import psql_load

COLUMNS = [("time_index", "integer"), ("value", "real")]


def _shard(path, rows, compression):
    with open_copy_writer(path, compression) as fh:
        fh.write("".join(f"{t}\t{v}\n" for t, v in rows).encode())
    return path


@pytest.mark.parametrize("compression, suffix", [("none", ""), ("gzip", ".gz")])
def test_shards_join_in_time_order_and_script_loads_that_file(tmp_path, compression, suffix,
                                                               pg_server, pg_conn):
    parts = [_shard(tmp_path / f"s{i}.copy{suffix}", rows, compression)
             for i, rows in enumerate([[(0, 1.5), (1, 2.5)], [(2, 3.5)], [(3, -1)]])]
    out = tmp_path / "run" / f"cells.copy{suffix}"
    sql = tmp_path / "run" / "cells.sql"
    size = reduce_cells(parts, out, sql, columns=COLUMNS, table="tas_cells", run="demo",
                        note="input: a.nc")
    assert size == out.stat().st_size == sum(p.stat().st_size for p in parts)
    text = gzip.decompress(out.read_bytes()) if compression == "gzip" else out.read_bytes()
    assert text == b"0\t1.5\n1\t2.5\n2\t3.5\n3\t-1\n"
    script = sql.read_text()
    assert f"-- Load with: cd {out.parent} && psql -f cells.sql DBNAME" in script
    assert "-- input: a.nc" in script
    copy_line = [ln for ln in script.splitlines() if ln.startswith("\\copy")]
    assert len(copy_line) == 1 and f" cells.copy{suffix}" in copy_line[0].replace("'", " ")
    assert str(tmp_path) not in copy_line[0]
    # The script is what a user runs: it loads exactly those rows as run 'demo'.
    psql_load(pg_server, out.parent)
    rows = pg_conn.execute('SELECT run, time_index, value FROM "tas_cells" '
                           "ORDER BY time_index").fetchall()
    assert rows == [("demo", 0, 1.5), ("demo", 1, 2.5), ("demo", 2, 3.5), ("demo", 3, -1.0)]
    pg_conn.execute('DROP TABLE "tas_cells"')
    assert sorted(p.name for p in out.parent.iterdir()) == sorted([out.name, "cells.sql"])


def test_missing_shard_leaves_no_output(tmp_path):
    part = _shard(tmp_path / "s0.copy", [(0, 1)], "none")
    out, sql = tmp_path / "cells.copy", tmp_path / "cells.sql"
    with pytest.raises(OSError):
        reduce_cells([part, tmp_path / "s1.copy"], out, sql, columns=COLUMNS, table="t",
                     run="r")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s0.copy"]
