r"""The normalised table layout: one row per cell, one per step, and the values between them.

Config ``cells.layout: normalised`` stores a run in three tables instead of one wide one:

``<table>_cells``
    ``run``, ``cell_id`` and the columns that describe a cell (:data:`CELL_ATTRIBUTES`
    present in the model's declaration: ``lat``, ``lon``, ``lon_raw``, ``geom`` and
    ``cell_area`` when the polygon column is on); primary key ``(run, cell_id)``, a GiST
    index on a PostGIS ``geom``.
``<table>_steps``
    ``run``, ``time_index`` and the columns of a time step (:data:`STEP_ATTRIBUTES`:
    ``time``, ``time_value``); primary key ``(run, time_index)``.
``<table>_values``
    ``run``, ``time_index``, ``cell_id`` and every other model column; primary key
    ``(run, time_index, cell_id)``, foreign keys to the run's cells and steps.

and a view ``<table>`` joining them to exactly the wide layout's columns, so queries
written for the wide table keep working. Each table is partitioned by ``LIST (run)`` and
a load swaps the run's three partitions in one transaction (:func:`ncreel.pg.sql.swap_statement`).

Indexes and keys are built on the run's new tables after their COPY, before the swap:
``ATTACH PARTITION`` then adopts each as the partition of the parent's index (no build,
no scan; PostgreSQL documentation, "ALTER TABLE ... ATTACH PARTITION": "if any of the
partitioned indexes ... exist on the target table, they are attached; otherwise
created"). The foreign keys are declared between the run's own partitions (values →
cells, values → steps of the same run), validated before the swap. Declared on the
parents instead, PostgreSQL would validate them at ``ATTACH`` against the parent (a scan
of the run's rows under the swap's lock), and it cannot add them ``NOT VALID`` to a
partitioned table.
"""

from __future__ import annotations

from collections.abc import Sequence

from ncreel.core.errors import NcreelError
from ncreel.pg.sql import (
    _do,
    _table,
    advisory_key,
    column_types_check,
    copy_statement,
    identifier,
    partitioned_checks,
    run_tables,
    stage_statement,
    table_name,
)
from ncreel.pg.types import (
    AREA_COLUMN,
    CELL_ATTRIBUTES,
    GEOMETRY_COLUMN,
    STEP_ATTRIBUTES,
)

#: Values of config ``cells.layout``.
LAYOUTS = ("wide", "normalised")
#: The three tables of the normalised layout, in the order every load locks them.
KINDS = ("cells", "steps", "values")
#: Most cells a grid may have in the normalised layout, whose ``cell_id`` is ``integer``.
MAX_CELLS = 2**31 - 1
#: Primary key columns (after ``run``) of each table.
KEYS = {"cells": ("cell_id",), "steps": ("time_index",), "values": ("time_index", "cell_id")}


def split_columns(columns: Sequence[Sequence[str]]) -> dict[str, list[tuple[str, str]]]:
    """Split the wide layout's columns into the normalised layout's three tables.

    Parameters
    ----------
    columns : sequence of (str, str)
        The run's wide columns (model declaration plus ``geom``), without ``run``.

    Returns
    -------
    dict
        ``cells``: ``cell_id`` then the :data:`CELL_ATTRIBUTES` present, in the wide
        order, and ``cell_area`` (m², double precision) after ``geom``; ``steps``:
        ``time_index`` then the :data:`STEP_ATTRIBUTES` present; ``values``:
        ``time_index``, ``cell_id`` and every other column, in the wide order. A
        ``bigint`` ``cell_id`` becomes ``integer`` (:data:`MAX_CELLS`).

    Raises
    ------
    NcreelError
        The columns lack ``cell_id`` or ``time_index`` (a user model that does not key its
        rows by cell and step can only use ``cells.layout: wide``).
    """
    # A bigint cell_id is stored as integer: ids are row-major indices below the grid's
    # cell count, checked below 2**31 before any job (runconfig), and the values table's
    # primary key takes 8 bytes less per row (its entries are MAXALIGNed).
    columns = [("cell_id", "integer") if c == ("cell_id", "bigint") else tuple(c)
               for c in columns]
    types = dict(columns)
    missing = [k for k in ("cell_id", "time_index") if k not in types]
    if missing:
        raise NcreelError(f"config key 'cells.layout': normalised needs the cell model's "
                          f"columns {' and '.join(missing)} (to key the cells and steps "
                          "tables); set cells.layout: wide")
    cells = [("cell_id", types["cell_id"])]
    cells += [c for c in columns if c[0] in CELL_ATTRIBUTES]
    if GEOMETRY_COLUMN in types:
        cells.append((AREA_COLUMN, "double precision"))
    steps = [("time_index", types["time_index"])]
    steps += [c for c in columns if c[0] in STEP_ATTRIBUTES]
    keyed = {"cell_id", "time_index", *CELL_ATTRIBUTES, *STEP_ATTRIBUTES}
    values = [("time_index", types["time_index"]), ("cell_id", types["cell_id"])]
    values += [c for c in columns if c[0] not in keyed]
    return {"cells": cells, "steps": steps, "values": values}


#: Fixed-width PostgreSQL types by alignment (bytes); any other type is variable-length.
_ALIGNED = {8: ("bigint", "int8", "double precision", "float8", "timestamp", "timestamptz",
                "time", "interval", "bigserial"),
            4: ("integer", "int4", "int", "real", "float4", "date", "oid", "serial"),
            2: ("smallint", "int2"),
            1: ("boolean", "bool", '"char"')}


def _alignment(pgtype: str) -> int:
    t = pgtype.strip().lower() + " "  # a name ends at a space or "(": not "timestamp" as "time"
    for size, names in _ALIGNED.items():
        if any(t.startswith((n + " ", n + "(")) for n in names):
            return size
    return 0  # variable-length (text, numeric, geometry, ...): stored unaligned when short


def storage_order(columns: Sequence[Sequence[str]]) -> list[tuple[str, str]]:
    """Return `columns` in the order that stores them with the least alignment padding.

    PostgreSQL aligns each fixed-width value to its size (8 bytes for ``bigint``,
    ``double precision``, ``timestamp``; 4 for ``integer``, ``real``) and pads before it
    (PostgreSQL documentation, "Database Page Layout", and ``pg_type.typalign``); short
    variable-length values (``text``, ``geometry`` under 127 bytes) are not aligned. Widest
    first, variable-length last (``run`` is one of those) leaves no padding between
    columns: a values row of the ``field`` model (``run``, ``time_index``, ``cell_id``,
    ``value``, ``anomaly``) takes 56 bytes instead of 64. Only the tables' physical order
    changes; COPY files name their columns, and the view keeps the wide order.

    Parameters
    ----------
    columns : sequence of (str, str)
        (name, PostgreSQL type).

    Returns
    -------
    list of (str, str)
        The same columns, stable-sorted by alignment: 8, 4, 2, 1 bytes, then variable-length.
    """
    cols = [tuple(c) for c in columns]
    return sorted(cols, key=lambda c: -_alignment(c[1]) or 1)  # 0, variable-length: last


def layout_tables(table: str) -> dict[str, str]:
    """Names of the three tables behind the view `table`: ``<table>_cells`` etc.

    Raises
    ------
    NcreelError
        `table`'s name is longer than 56 bytes (``_values`` must fit PostgreSQL's 63).
    """
    parts = table_name(table)
    if len(parts[-1].encode()) > 63 - len("_values"):
        raise NcreelError(f"config key 'table': {parts[-1]!r} is longer than 56 bytes, and "
                          "cells.layout normalised adds _values to it (PostgreSQL names hold "
                          "63 bytes): use a shorter table name")
    return {k: ".".join([*parts[:-1], f"{parts[-1]}_{k}"]) for k in KINDS}


def view_columns(columns: Sequence[Sequence[str]]) -> list[tuple[str, str]]:
    """(column, alias of its table in the view) of the wide layout, in its order."""
    split = split_columns(columns)
    cell = {n for n, _ in split["cells"]} - {"cell_id"}
    step = {n for n, _ in split["steps"]} - {"time_index"}
    return [("run", "v")] + [(n, "c" if n in cell else "s" if n in step else "v")
                             for n, _ in columns]


def create_statement(table: str, columns: Sequence[Sequence[str]]) -> str:
    """Return the SQL creating the three partitioned tables and the view `table` where missing.

    Serialised by the table's advisory lock, in its own short transaction (as
    :func:`ncreel.pg.sql.create_statement`). Objects that exist are left alone and take no
    lock (a view being replaced would wait for, and then hold up, its readers). Raises
    (SQL) when `table` exists but is not a view, or one of the three is not a table
    partitioned by run.

    Returns
    -------
    str
        One ``DO`` statement, without the trailing ``;``.
    """
    from psycopg import sql

    split = split_columns(columns)
    names = layout_tables(table)
    body = [sql.SQL("PERFORM pg_advisory_xact_lock({});").format(advisory_key(table))]
    for kind in KINDS:
        t = _table(names[kind])
        reg = sql.Literal(t.as_string(None))
        cols = sql.SQL(",\n    ").join(
            [sql.SQL("{} {}").format(identifier(n), sql.SQL(p))
             for n, p in storage_order(split[kind])]
            + [sql.SQL("{} text NOT NULL").format(identifier("run"))]
            + [sql.SQL("PRIMARY KEY ({})").format(sql.SQL(", ").join(
                identifier(k) for k in ("run", *KEYS[kind])))])
        index = sql.SQL("")
        if kind == "cells" and "geometry" in dict(split["cells"]).get(GEOMETRY_COLUMN, ""):
            # The index of a table that has none on geom (one just created), as the check
            # "is the table new" cannot be to_regclass (below).
            index = sql.SQL(
                "\nIF NOT EXISTS (SELECT FROM pg_index i JOIN pg_class c ON c.oid = "
                "i.indexrelid JOIN pg_am a ON a.oid = c.relam JOIN pg_attribute t ON "
                "t.attrelid = i.indrelid AND t.attnum = ANY(i.indkey) WHERE i.indrelid = "
                "{reg}::regclass AND a.amname = 'gist' AND t.attname = {geom}) THEN\n"
                "  CREATE INDEX ON {t} USING gist ({geom_id});\n"
                "END IF;").format(reg=reg, t=t, geom=sql.Literal(GEOMETRY_COLUMN),
                                  geom_id=identifier(GEOMETRY_COLUMN))
        # IF NOT EXISTS, not IF to_regclass(...) IS NULL: a session that waited for the
        # advisory lock may hold a cached "no such relation" for a table the session before
        # it created (an advisory lock does not read the catalog's invalidations), and
        # would then fail with "relation already exists". CREATE TABLE takes the schema's
        # lock, which does, so the checks and to_regclass below see the catalog as it is.
        # An existing table of other columns (a wide table named <table>_values, another
        # model's) is refused here too, before the view is made over it: psql -f
        # cells.sql has no other check before this transaction commits.
        # Compared by name in any order, as the load's check (ncreel.pg.load._check_table).
        want = [*(n for n, _ in storage_order(split[kind])), "run"]
        columns_check = sql.SQL(
            "\nIF (SELECT array_agg(attname::text ORDER BY attname::text COLLATE \"C\") FROM "
            "pg_attribute WHERE attrelid = {reg}::regclass AND attnum > 0 AND NOT "
            "attisdropped) <> {sorted_want} THEN\n"
            "  RAISE EXCEPTION USING ERRCODE = 'wrong_object_type', MESSAGE = format({msg},\n"
            "    (SELECT string_agg(attname, ', ' ORDER BY attnum) FROM pg_attribute WHERE "
            "attrelid = {reg}::regclass AND attnum > 0 AND NOT attisdropped));\n"
            "END IF;").format(
                reg=reg, sorted_want=sql.Literal(sorted(want)),
                msg=sql.Literal(f"table {names[kind].replace('%', '%%')} exists with columns "
                                f"(%s), but cells.layout normalised keeps ({', '.join(want)})"
                                f" in it: set config key 'table' to a new name"))
        body.append(sql.SQL(
            "CREATE TABLE IF NOT EXISTS {t} (\n    {cols}\n) PARTITION BY LIST ({run});\n"
            "{checks}{columns_check}\n{types}{index}").format(
                t=t, cols=cols, run=identifier("run"), index=index,
                checks=partitioned_checks(names[kind]), columns_check=columns_check,
                types=column_types_check(names[kind], split[kind])))
    view = _table(table)
    reg = sql.Literal(view.as_string(None))
    select = sql.SQL(", ").join(sql.SQL("{}.{}").format(identifier(a), identifier(n))
                                for n, a in view_columns(columns))
    body.append(sql.SQL(
        "IF to_regclass({reg}) IS NULL THEN\n"
        "  CREATE VIEW {view} AS SELECT {select}\n"
        "    FROM {values} v\n"
        "    JOIN {steps} s ON s.run = v.run AND s.time_index = v.time_index\n"
        "    JOIN {cells} c ON c.run = v.run AND c.cell_id = v.cell_id;\n"
        "END IF;\n"
        "IF (SELECT relkind FROM pg_class WHERE oid = {reg}::regclass) <> 'v' THEN\n"
        "  RAISE EXCEPTION USING MESSAGE = {message}, ERRCODE = 'wrong_object_type';\n"
        "END IF;").format(
            reg=reg, view=view, select=select, values=_table(names["values"]),
            steps=_table(names["steps"]), cells=_table(names["cells"]),
            message=sql.Literal(
                f"{table} exists and is not a view: it is a table of cells.layout wide (or "
                "one of the three tables of another normalised table); set cells.layout: "
                "wide, or config key 'table' to a new name")))
    return _do(sql.SQL("\n").join(body))


def load_statements(table: str, columns: Sequence[Sequence[str]], run: str, *,
                    create_stage: bool = True) -> list[str]:
    """Return the SQL starting the run's load, in the load transaction, before any COPY.

    The run's advisory lock, the leftovers of a killed load dropped, and (unless
    `create_stage` is false) the run's three new tables created, each with the ``CHECK``
    of its partition bound (:func:`ncreel.pg.sql.stage_statement`). Nothing here locks
    the shared tables.
    """
    from psycopg import sql

    split = split_columns(columns)
    names = layout_tables(table)
    stages = [run_tables(names[k], run) for k in KINDS]
    out = [_do(sql.SQL("PERFORM pg_advisory_xact_lock({});").format(
        advisory_key(table, run)))]
    if create_stage:
        out.append(sql.SQL("DROP TABLE IF EXISTS {}").format(sql.SQL(", ").join(
            identifier(*s[k]) for s in stages for k in ("stage", "staged"))).as_string(None))
        out += [stage_statement(names[k], storage_order(split[k]), run, run_last=True)
                for k in KINDS]
    return out


def index_statements(table: str, columns: Sequence[Sequence[str]], run: str) -> list[str]:
    """Return the SQL run on the run's new tables after their COPY, before the swap.

    Primary keys, the GiST index on a PostGIS ``geom``, the foreign keys values → cells
    and values → steps (between the run's own new tables, validated here, outside any
    lock on the shared tables), and ``ANALYZE`` so that the first queries after the swap
    are planned with the run's statistics.
    """
    from psycopg import sql

    split = split_columns(columns)
    names = layout_tables(table)
    stage = {k: identifier(*run_tables(names[k], run)["stage"]) for k in KINDS}
    out = []
    for kind in KINDS:
        # Leaves packed full (fillfactor 100, 10 % smaller than the default 90): a run's
        # partition is written once and replaced whole, never updated in place.
        key = sql.SQL(", ").join(identifier(k) for k in ("run", *KEYS[kind]))
        out.append(sql.SQL("ALTER TABLE {} ADD PRIMARY KEY ({}) WITH (fillfactor = 100)")
                   .format(stage[kind], key))
    if "geometry" in dict(split["cells"]).get(GEOMETRY_COLUMN, ""):
        out.append(sql.SQL("CREATE INDEX ON {} USING gist ({})").format(
            stage["cells"], identifier(GEOMETRY_COLUMN)))
    for kind in ("cells", "steps"):
        key = sql.SQL(", ").join(identifier(k) for k in ("run", *KEYS[kind]))
        out.append(sql.SQL("ALTER TABLE {} ADD FOREIGN KEY ({}) REFERENCES {} ({})").format(
            stage["values"], key, stage[kind], key))
    out += [sql.SQL("ANALYZE {}").format(stage[k]) for k in KINDS]
    return [s.as_string(None) for s in out]


def load_script(table: str, columns: Sequence[Sequence[str]], copy_files: dict[str, str],
                *, run: str, comment: str = "") -> str:
    r"""Return the psql script loading the normalised layout's three COPY files as run `run`.

    As :func:`ncreel.pg.sql.load_script` (run it with ``psql -f`` from the directory of
    the files): the tables and view are created where missing, then one transaction
    creates the run's three new tables, ``\copy``-loads them with ``FREEZE``, builds their
    keys and indexes (:func:`index_statements`) and swaps all three in; the earlier
    partitions are dropped after the commit.

    Parameters
    ----------
    copy_files : dict
        COPY file name (relative to where psql runs) for ``cells``, ``steps``, ``values``.
    """
    from ncreel.pg.sql import PSQL_PREAMBLE, _copy_source, drop_old_statement, swap_statement

    split = split_columns(columns)
    names = layout_tables(table)
    tables = [names[k] for k in KINDS]
    lines = [f"-- {line}" for line in comment.splitlines()]
    lines += [*PSQL_PREAMBLE, f"{create_statement(table, columns)};", "BEGIN;"]
    lines += [f"{s};" for s in load_statements(table, columns, run)]
    for kind in KINDS:
        stage = run_tables(names[kind], run)["stage"]
        lines.append("\\" + copy_statement(stage, split[kind], _copy_source(copy_files[kind]),
                                           freeze=True).replace("COPY", "copy", 1))
    lines += [f"{s};" for s in index_statements(table, columns, run)]
    lines += [f"{swap_statement(table, run, tables)};", "COMMIT;",
              f"{drop_old_statement(table, run, tables)};", ""]
    return "\n".join(lines)
