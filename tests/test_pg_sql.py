"""The SQL that loads a COPY file: table names and the load script (ncreel.pg.sql)."""

import pytest
from ncreel.pg.sql import load_script, run_tables, table_name


def test_load_script_and_table_names():
    sql = load_script("ncreel_demo", [("a", "integer"), ("b", "text")], "cells.copy", run="demo")
    assert "\\set ON_ERROR_STOP on" in sql
    stage, old = (run_tables("ncreel_demo", "demo")[k][-1] for k in ("stage", "old"))
    assert f"\\copy \"{stage}\" (\"a\", \"b\") FROM 'cells.copy' WITH (FORMAT text, FREEZE)" \
        in sql
    # The new table is made in the load transaction (FREEZE), the shared one locked last.
    assert sql.index("PARTITION BY LIST (\"run\")") < sql.index("BEGIN;") \
        < sql.index(f"CREATE TABLE \"{stage}\"") < sql.index("CHECK (\"run\" = 'demo')") \
        < sql.index("\\copy") < sql.index("DETACH PARTITION") \
        < sql.index("ATTACH PARTITION") < sql.index("RENAME TO \"ncreel_demo$demo\"") \
        < sql.index(f"COMMIT;\nDROP TABLE IF EXISTS \"{old}\";\n")
    assert "DELETE" not in sql and "LIKE" not in sql
    assert run_tables("c", "r" * 62)["partition"][-1].startswith("c$")  # hashed, <= 63 bytes
    assert len(run_tables("x" * 63, "r")["partition"][-1].encode()) <= 63
    in_schema = run_tables("s.c", "r")
    assert in_schema["partition"] == ("s", "c$r") and in_schema["stage"][0] == "s"
    assert table_name("public.cells") == ("public", "cells")
    assert table_name("Select") == ("Select",)
    quoted = load_script('a"b', [("x", "integer")], "cells.copy", run="demo")
    assert '"a""b"' in quoted and "'\"a\"\"b\"'" in quoted
    for bad in ("a.b.c", "", "a.", "x" * 64, "t\x00"):
        with pytest.raises(ValueError):
            table_name(bad)
    with pytest.raises(ValueError):
        load_script("t", [("a", "integer")], "cells'; \\! rm -rf /", run="demo")


def test_partition_names_are_unique_per_table_and_run():
    """Table ``a`` run ``b_c`` and table ``a_b`` run ``c`` once shared partition ``a_b_c``."""
    pairs = [("a", "b_c"), ("a_b", "c"), ("a_b_c", "x"), ("a", "b_c_x")]
    long = ["t" * 40, "t" * 40 + "_" + "u" * 9, "t" * 62, "t" * 63, "t" * 48 + "$x"]
    runs = ["r", "r" * 20, "r" * 20 + "_1", "1_" + "r" * 20, "a.b-c", "x" * 100]
    pairs += [(t, r) for t in long for r in runs]
    names = {}
    for table, run in pairs:
        name = run_tables(table, run)["partition"][-1]
        assert 0 < len(name.encode()) <= 63, (table, run, name)
        assert names.setdefault(name, (table, run)) == (table, run), \
            f"{(table, run)} and {names[name]} share partition {name}"
    # Uncut names keep the run readable after the table's name.
    assert run_tables("a", "b_c")["partition"] == ("a$b_c",)
