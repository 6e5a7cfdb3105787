"""The SQL that loads a run's COPY file: table names, DDL, partitions, the load script.

Each run is a partition (LIST on ``run``) of the shared table: a load COPYs into a new
table with a CHECK matching its bound, then swaps it in (``ATTACH PARTITION``, no
validation scan); the same statements serve the load rule (:mod:`ncreel.pg.load`) and
``cells.sql`` for ``psql -f``.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence

#: An unquoted lower-case PostgreSQL identifier (NAMEDATALEN - 1 = 63 characters); the
#: cell models' column names follow it so users can type them unquoted.
IDENTIFIER = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")

#: Name of the CHECK constraint a run's new table gets before its COPY: the partition
#: bound written as a constraint, so ``ATTACH PARTITION`` needs no validation scan.
BOUND_CHECK = "ncreel_run_bound"


def table_name(name: str) -> tuple[str, ...]:
    """Split a table name into its parts: ``table`` or ``schema.table``.

    Any name PostgreSQL can hold is accepted (reserved words, mixed case, spaces): every
    statement quotes it as an identifier, so ``Cells`` is the case-sensitive ``"Cells"``.

    Returns
    -------
    tuple of str
        ``(table,)`` or ``(schema, table)``.

    Raises
    ------
    ValueError
        Empty part, more than one ``.``, a NUL character, or a part longer than 63 bytes
        (PostgreSQL's NAMEDATALEN - 1; longer names would be silently truncated).
    """
    parts = tuple(name.split("."))
    if len(parts) > 2 or not all(0 < len(p.encode()) <= 63 and "\x00" not in p for p in parts):
        raise ValueError(f"table name {name!r}: use table or schema.table, each part 1 to 63 "
                         "bytes")
    return parts


def identifier(*parts: str):
    """``psycopg.sql.Identifier`` of `parts` (quoted with SQL's ``"…"`` rules when rendered)."""
    from psycopg import sql

    return sql.Identifier(*parts)


def _table(table: str):
    return identifier(*table_name(table))


#: Separator of a run's partition name, ``<table>$<run>``: run names never contain it, so
#: the run is the text after the last ``$`` and no two (table, run) pairs share a name
#: (with ``_``, table ``a`` run ``b_c`` and table ``a_b`` run ``c`` would both be ``a_b_c``).
PARTITION_SEPARATOR = "$"


def partition_name(table: str, run: str) -> str:
    """Name of the run's partition of `table`: ``<table>$<run>``, unique for every pair.

    Parameters
    ----------
    table : str
        Table name, see :func:`table_name` (its schema part is not in the result).
    run : str
        Run name (letters, digits, ``_.-``; never ``$``).

    Returns
    -------
    str
        ``<table>$<run>`` when it fits PostgreSQL's 63-byte identifiers; else its first
        48 bytes, ``$#`` and 13 hex digits of a SHA-1 of (table, run): the text after the
        last ``$`` then holds ``#``, which no run name does, so a cut name never equals
        an uncut one, and two cut names differ unless 52 hash bits collide.
    """
    parts = table_name(table)
    name = f"{parts[-1]}{PARTITION_SEPARATOR}{_run_name(run)}"
    if len(name.encode()) <= 63:
        return name
    h = hashlib.sha1(f"{table}\0{run}".encode()).hexdigest()[:13]
    return f"{name.encode()[:48].decode(errors='ignore')}{PARTITION_SEPARATOR}#{h}"


def run_tables(table: str, run: str) -> dict[str, tuple[str, ...]]:
    """Names of the tables one run of `table` uses, each in `table`'s schema.

    Returns
    -------
    dict
        ``partition``: the run's partition once attached, :func:`partition_name`
        (``<table>$<run>``); ``stage``: the run's new table while it loads
        (``ncreel_stage_<hash>``); ``staged``: the files a parallel load has committed
        into ``stage`` (``ncreel_staged_<hash>``); ``old``: the run's earlier partition
        between the swap and its ``DROP`` (``ncreel_old_<hash>``).
    """
    parts = table_name(table)
    h = hashlib.sha1(f"{table}\0{_run_name(run)}".encode()).hexdigest()[:16]
    schema = parts[:-1]
    return {"partition": (*schema, partition_name(table, run)),
            "stage": (*schema, f"ncreel_stage_{h}"),
            "staged": (*schema, f"ncreel_staged_{h}"), "old": (*schema, f"ncreel_old_{h}")}


def advisory_key(table: str, run: str | None = None):
    """Arguments of ``pg_advisory_(xact_)lock(int, int)``: one key per table, one per run.

    Returns
    -------
    psycopg.sql.Composed
        ``hashtext(…), hashtext(…)``; a hash collision only serialises two loads.
    """
    from psycopg import sql

    qualified = _table(table).as_string(None)
    if run is None:
        return sql.SQL("hashtext({}), hashtext({})").format(
            sql.Literal("ncreel create table"), sql.Literal(qualified))
    return sql.SQL("hashtext({}), hashtext({})").format(sql.Literal(qualified),
                                                        sql.Literal(run))


def _do(body, declare: str = "") -> str:
    """Wrap `body` in a ``DO`` block (composed SQL), dollar-quoted with a tag not in it."""
    text = body.as_string(None)
    tag = "$ncreel$"
    n = 0
    while tag in text:
        n += 1
        tag = f"$ncreel{n}$"
    head = f"DECLARE {declare}\n" if declare else ""
    return f"DO {tag}\n{head}BEGIN\n{text}\nEND\n{tag}"


def older_table_message(table: str) -> str:
    """Return the one-line error for a `table` made by an ncreel keeping runs in one table."""
    return (f"table {table} exists but is not partitioned by run (it was made by an older "
            "ncreel, which kept every run in one table): rename it (ALTER TABLE ... RENAME "
            "TO ...) and rerun, or set config key 'table' to a new name; docs/cells.md, "
            "'Tables made by an older ncreel', shows how to move its runs over")


def view_table_message(table: str) -> str:
    """Return the one-line error for a `table` that is a view (cells.layout normalised's)."""
    return (f"table {table} is a view, as cells.layout normalised makes over {table}_cells, "
            f"{table}_steps and {table}_values: set cells.layout: normalised, or config key "
            "'table' to a new name")


def partition_table_message(table: str, parent: str) -> str:
    """Return the one-line error for a `table` that is a run's partition of table `parent`."""
    return (f"table {table} is a partition of table {parent} (ncreel keeps each run of a "
            "table in a partition named <table>$<run>): set config key 'table' to another "
            "name")


def create_statement(table: str, columns: Sequence[tuple[str, str]]) -> str:
    """Return the SQL creating `table` if missing, serialised, in its own short transaction.

    `table` is partitioned by ``LIST (run)``: each run is one partition (see
    :func:`load_statements`). Concurrent ``CREATE TABLE IF NOT EXISTS`` of one name race
    in the catalog (``duplicate key value violates unique constraint
    "pg_type_typname_nsp_index"``), so creation runs under a transaction-level advisory
    lock per table name. An existing table that is not partitioned (made by an older
    ncreel) raises :func:`older_table_message`; one that is another table's run partition,
    :func:`partition_table_message`.

    Parameters
    ----------
    table : str
        Table name, see :func:`table_name`.
    columns : sequence of (str, str)
        Column names and PostgreSQL types, in COPY file order (types are SQL as given).

    Returns
    -------
    str
        One ``DO`` statement, without the trailing ``;``.
    """
    from psycopg import sql

    t = _table(table)
    body = sql.SQL(",\n    ").join(
        [sql.SQL("{} text NOT NULL").format(identifier("run"))]
        + [sql.SQL("{} {}").format(identifier(n), sql.SQL(pgtype)) for n, pgtype in columns])
    stmt = sql.SQL(
        "PERFORM pg_advisory_xact_lock({key});\n"
        "CREATE TABLE IF NOT EXISTS {t} (\n    {body}\n) PARTITION BY LIST ({run});\n"
        "{checks}\n{types}").format(key=advisory_key(table), t=t, body=body,
                                    run=identifier("run"), checks=partitioned_checks(table),
                                    types=column_types_check(table, columns))
    return _do(stmt)


def column_types_check(table: str, columns: Sequence[tuple[str, str]]):
    """PL/pgSQL raising when a column of `table` has another type than `columns` give it.

    Run before anything of a load is made, so that a clash (a float32 run's ``real``
    against a packed or 64-bit run's ``double precision``) is one line naming the column
    and both types, not the ``ATTACH PARTITION`` error after every file was copied, and
    leaves no table of the run behind. Types are compared as PostgreSQL resolves them
    (``to_regtype``: ``float8`` is ``double precision``; type modifiers aside); a type
    the server does not know is left to the load. Columns of other names are the name
    check's (:func:`ncreel.pg.load._check_table`).

    Returns
    -------
    psycopg.sql.Composed
    """
    from psycopg import sql

    reg = sql.Literal(_table(table).as_string(None))
    clash = sql.SQL(
        "FROM pg_attribute a JOIN (VALUES {rows}) AS w(name, type) ON w.name = a.attname "
        "WHERE a.attrelid = {reg}::regclass AND a.attnum > 0 AND NOT a.attisdropped AND "
        "to_regtype(w.type) IS NOT NULL AND a.atttypid <> to_regtype(w.type)::oid").format(
            rows=sql.SQL(", ").join(sql.SQL("({}, {})").format(sql.Literal(n), sql.Literal(t))
                                    for n, t in columns), reg=reg)
    message = sql.Literal(
        f"table {table.replace('%', '%%')} has column %s of type %s, but this run writes "
        "%s: the runs of one table share its column types (a float32 variable is written "
        "as real, a packed or 64-bit one as double precision): set config key 'table' to "
        "a new name")
    return sql.SQL(
        "IF EXISTS (SELECT {clash}) THEN\n"
        "  RAISE EXCEPTION USING ERRCODE = 'datatype_mismatch', MESSAGE = (SELECT format("
        "{message}, a.attname, format_type(a.atttypid, a.atttypmod), w.type) {clash} "
        "ORDER BY a.attnum LIMIT 1);\n"
        "END IF;").format(clash=clash, message=message)


def partitioned_checks(table: str):
    """PL/pgSQL raising when `table` is a partition itself or not partitioned (composed SQL).

    The messages are :func:`partition_table_message`, :func:`view_table_message` (a view,
    as the normalised layout makes) and :func:`older_table_message`.
    """
    from psycopg import sql

    reg = sql.Literal(_table(table).as_string(None))
    return sql.SQL(
        "IF (SELECT relispartition FROM pg_class WHERE oid = {reg}::regclass) THEN\n"
        "  RAISE EXCEPTION USING ERRCODE = 'wrong_object_type', MESSAGE = format({partition},\n"
        "    (SELECT inhparent::regclass FROM pg_inherits WHERE inhrelid = {reg}::regclass));\n"
        "END IF;\n"
        "IF (SELECT relkind FROM pg_class WHERE oid = {reg}::regclass) = 'v' THEN\n"
        "  RAISE EXCEPTION USING MESSAGE = {view}, ERRCODE = 'wrong_object_type';\n"
        "END IF;\n"
        "IF (SELECT relkind FROM pg_class WHERE oid = {reg}::regclass) <> 'p' THEN\n"
        "  RAISE EXCEPTION USING MESSAGE = {message}, ERRCODE = 'wrong_object_type';\n"
        "END IF;").format(reg=reg, partition=sql.Literal(partition_table_message(
                              table.replace("%", "%%"), "%s")),
                          view=sql.Literal(view_table_message(table)),
                          message=sql.Literal(older_table_message(table)))


def load_statements(table: str, columns: Sequence[tuple[str, str]], run: str) -> list[str]:
    """Return the SQL that starts loading `run` into `table`, inside the load transaction.

    Take the run's advisory lock (two loads of one run queue; loads of other runs do not),
    drop what a killed parallel load of the run left, and create the run's new table
    (:func:`run_tables` ``stage``): `columns` after ``run text NOT NULL DEFAULT '<run>'``
    with ``CHECK (run = '<run>')``, the partition bound, so the later ``ATTACH PARTITION``
    skips its validation scan. Nothing here touches `table` itself: loads hold no lock on
    it until :func:`swap_statement`. The COPY follows (:func:`copy_statement` with
    ``freeze=True``: the table was created in this transaction). Run
    :func:`create_statement` first, in its own transaction.

    Parameters
    ----------
    table : str
        Table name, see :func:`table_name`.
    columns : sequence of (str, str)
        Column names and PostgreSQL types, in COPY file order.
    run : str
        Run name (letters, digits, ``_.-``).

    Returns
    -------
    list of str
        Statements, each without the trailing ``;``.
    """
    from psycopg import sql

    names = run_tables(table, run)
    lock = sql.SQL("PERFORM pg_advisory_xact_lock({});").format(advisory_key(table, run))
    return [_do(lock),
            sql.SQL("DROP TABLE IF EXISTS {}, {}").format(
                identifier(*names["stage"]), identifier(*names["staged"])).as_string(None),
            stage_statement(table, columns, run)]


def stage_statement(table: str, columns: Sequence[tuple[str, str]], run: str, *,
                    run_last: bool = False) -> str:
    """``CREATE TABLE`` of the run's new table, shaped as a partition of `table` for `run`.

    ``run`` is its first column, or its last with `run_last` (where `columns` are in
    :func:`ncreel.pg.layout.storage_order`, a text column after them pads nothing).

    The columns are spelled out rather than ``LIKE table``: ``LIKE`` would hold a lock on
    `table` for the whole load, and two reruns would then deadlock at their swaps.
    """
    from psycopg import sql

    lit = sql.Literal(_run_name(run))
    run_column = [sql.SQL("{} text NOT NULL DEFAULT {} CONSTRAINT {} CHECK ({} = {})").format(
        identifier("run"), lit, identifier(BOUND_CHECK), identifier("run"), lit)]
    cols = [sql.SQL("{} {}").format(identifier(n), sql.SQL(pgtype)) for n, pgtype in columns]
    body = sql.SQL(",\n    ").join(cols + run_column if run_last else run_column + cols)
    return sql.SQL("CREATE TABLE {} (\n    {}\n)").format(
        identifier(*run_tables(table, run)["stage"]), body).as_string(None)


def old_partition_query(table: str, run: str) -> str:
    """``SELECT`` of the run's attached partition (a ``regclass``; no row when none)."""
    from psycopg import sql

    return sql.SQL(
        "SELECT c.oid::regclass FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid "
        "WHERE i.inhparent = {reg}::regclass "
        "AND pg_get_expr(c.relpartbound, c.oid) = format('FOR VALUES IN (%L)', {run}::text)"
    ).format(reg=sql.Literal(_table(table).as_string(None)),
             run=sql.Literal(_run_name(run))).as_string(None)


#: Longest wait, in ms, for the lock on the table at each swap attempt. A session waiting
#: for a lock makes later ones queue behind it, so the swap gives up quickly and tries
#: again rather than stall every reader of the table behind a long query.
SWAP_LOCK_TIMEOUT_MS = 40
#: After this many seconds of attempts the swap waits for the lock as long as it takes.
SWAP_PATIENCE_S = 600
#: Setting (for the rest of the load transaction) in which the swap leaves the seconds
#: its earlier attempts took.
SWAP_WAITED_SETTING = "ncreel.swap_waited"


def swap_statement(table: str, run: str, tables: Sequence[str] | None = None) -> str:
    """Return the SQL replacing the run's partition of `table` with its new table.

    ``DETACH`` the run's earlier partition, if any, and rename it to :func:`run_tables`
    ``old`` (:func:`drop_old_statement` drops it after the commit, so the time its files
    take to delete is spent outside any lock on `table`), then ``ATTACH`` the new
    table (validated by its ``CHECK``, no scan) and rename it to the run's partition name
    (:func:`run_tables`), owned by `table`'s owner, so that any member of that role can
    replace it later. Run it last in the load transaction: the only lock on `table`
    itself is taken here, held until the commit: ``SHARE UPDATE EXCLUSIVE`` for a run's
    first load (readers go on), ``ACCESS EXCLUSIVE`` for milliseconds when a partition is
    replaced (PostgreSQL's ``DETACH`` in a transaction needs it). Every load takes this one
    lock on `table` and no other, so loads never deadlock with each other. The lock is
    asked for with a :data:`SWAP_LOCK_TIMEOUT_MS` ``lock_timeout`` and asked again after a
    pause when that runs out (after :data:`SWAP_PATIENCE_S`, without a timeout): a query
    already running on `table` delays the swap, but the swap never heads a queue that new
    readers of `table` would wait in. The seconds lost so are left in the transaction's
    setting :data:`SWAP_WAITED_SETTING`.

    Parameters
    ----------
    table : str
        Table name, see :func:`table_name`.
    run : str
        Run name.
    tables : sequence of str, optional
        Tables to swap the run's partition of, in this order, all in one attempt (the
        normalised layout's cells, steps and values tables); default ``[table]``.

    Returns
    -------
    str
        One ``DO`` statement, without the trailing ``;``.
    """
    from psycopg import sql

    # Each attempt is a block with an EXCEPTION clause, i.e. a subtransaction: one that
    # times out on its lock is rolled back alone, keeping the COPY. Several tables (the
    # normalised layout's) are swapped in one attempt, always in the given order, so
    # that two loads never take their locks in opposite orders.
    steps = []
    for parent in tables or [table]:
        names = run_tables(parent, run)
        reg = sql.Literal(_table(parent).as_string(None))
        steps.append(sql.SQL(
            "    old := ({query});\n"
            "    IF old IS NOT NULL THEN\n"
            "      EXECUTE format('ALTER TABLE %s DETACH PARTITION %s', {reg}::regclass, old);\n"
            "      DROP TABLE IF EXISTS {old_table} CASCADE;\n"
            "      EXECUTE format('ALTER TABLE %s RENAME TO %I', old, {old_name});\n"
            "    END IF;\n"
            "    EXECUTE format('ALTER TABLE %s OWNER TO %s', {stage_reg}::regclass,\n"
            "      (SELECT relowner::regrole FROM pg_class WHERE oid = {reg}::regclass));\n"
            "    ALTER TABLE {t} ATTACH PARTITION {stage} FOR VALUES IN ({run});\n"
            "    ALTER TABLE {stage} RENAME TO {part};\n").format(
                query=sql.SQL(old_partition_query(parent, run)), reg=reg, t=_table(parent),
                stage=identifier(*names["stage"]), run=sql.Literal(run),
                stage_reg=sql.Literal(identifier(*names["stage"]).as_string(None)),
                old_name=sql.Literal(names["old"][-1]), old_table=identifier(*names["old"]),
                part=identifier(names["partition"][-1])))
    stmt = sql.SQL(
        "LOOP\n"
        "  BEGIN\n"
        "    attempt := clock_timestamp();\n"
        "    PERFORM set_config('lock_timeout', CASE WHEN attempt - started > {patience}\n"
        "      THEN '0' ELSE {timeout} END, true);\n"
        "{steps}"
        "    EXIT;\n"
        "  EXCEPTION WHEN lock_not_available THEN\n"
        "    PERFORM pg_sleep(pause);\n"
        "    pause := least(2 * pause, 0.5);\n"
        "  END;\n"
        "END LOOP;\n"
        "PERFORM set_config('lock_timeout', saved, true);\n"
        "PERFORM set_config({waited}, extract(epoch FROM attempt - started)::text, true);"
    ).format(
            patience=sql.Literal(f"{SWAP_PATIENCE_S} seconds"),
            timeout=sql.Literal(f"{SWAP_LOCK_TIMEOUT_MS}ms"),
            steps=sql.SQL("").join(steps), waited=sql.Literal(SWAP_WAITED_SETTING))
    return _do(stmt, declare="old regclass; started timestamptz := clock_timestamp(); "
               "attempt timestamptz; pause float8 := 0.02; "
               "saved text := current_setting('lock_timeout');")


def drop_old_statement(table: str, run: str, tables: Sequence[str] | None = None) -> str:
    """``DROP`` the run's earlier partition, detached by :func:`swap_statement`; run after it.

    A load killed between the two leaves it; the run's next swap drops it. (Not the next
    load's first statements: they would hold its lock for the whole COPY, and a load of
    the run that has just swapped would wait that long to drop it here.) `tables` as for
    :func:`swap_statement`: their earlier partitions are dropped in one statement (a
    values partition's foreign keys refer to the cells and steps partitions).
    """
    from psycopg import sql

    return sql.SQL("DROP TABLE IF EXISTS {}").format(sql.SQL(", ").join(
        identifier(*run_tables(t, run)["old"]) for t in tables or [table])).as_string(None)


def copy_statement(table: str | tuple[str, ...], columns: Sequence[tuple[str, str]],
                   source: str = "STDIN", freeze: bool = False) -> str:
    """Return ``COPY "table" ("col", …) FROM source WITH (FORMAT text)`` (``run``: default).

    `table` is a name (:func:`table_name`) or its parts. ``freeze=True`` adds ``FREEZE``
    (rows written frozen, so no later VACUUM rewrites them): only for a table created or
    truncated in the same transaction.
    """
    from psycopg import sql

    target = identifier(*table) if isinstance(table, tuple) else _table(table)
    return sql.SQL("COPY {} ({}) FROM {} WITH (FORMAT text{})").format(
        target, sql.SQL(", ").join(identifier(n) for n, _ in columns),
        sql.SQL(source), sql.SQL(", FREEZE" if freeze else "")).as_string(None)


#: First lines of every psql load script: stop (and roll back) at the first error; quiet
#: notices; the COPY files are UTF-8 whatever the psql user's locale (under LANG=C psql
#: would send them as SQL_ASCII, and a LATIN1 database would store the bytes garbled).
PSQL_PREAMBLE = ("\\set ON_ERROR_STOP on", "SET client_min_messages = warning;",
                 "SET client_encoding = 'UTF8';")


def load_script(table: str, columns: Sequence[tuple[str, str]], copy_file: str,
                *, run: str, comment: str = "") -> str:
    r"""Return the psql script loading `copy_file` into `table` as run `run`.

    Run it from the directory holding `copy_file`: ``psql -f cells.sql DBNAME``. It runs
    the same SQL as the ``load_database`` rule and makes the same guarantees: the table is
    created if missing (serialised, :func:`create_statement`), then one transaction
    creates the run's new table (:func:`load_statements`), ``\copy``-loads the file into
    it with ``FREEZE`` and swaps it in as the run's partition (:func:`swap_statement`),
    then drops the earlier partition (:func:`drop_old_statement`), so
    other sessions see the run's old rows or all the new ones, readers of other runs are
    never blocked by the COPY, and concurrent loads of other runs never deadlock.
    ``ON_ERROR_STOP`` makes psql stop, and roll back, at the first error.

    Parameters
    ----------
    table : str
        Table name, see :func:`table_name`.
    columns : sequence of (str, str)
        Column names and PostgreSQL types, in COPY file order.
    copy_file : str
        COPY text file name, relative to where psql runs; a ``.gz`` or ``.zst`` name is
        read through ``gzip -dc``/``zstd -dc`` with ``\copy … FROM PROGRAM``.
    run : str
        Run name, stored in the ``run`` column.
    comment : str
        Text for a leading SQL comment (e.g. the run and input).
    """
    source = _copy_source(copy_file)
    stage = run_tables(table, run)["stage"]
    lines = [f"-- {line}" for line in comment.splitlines()]
    lines += [*PSQL_PREAMBLE, f"{create_statement(table, columns)};", "BEGIN;"]
    lines += [f"{stmt};" for stmt in load_statements(table, columns, run)]
    # psql's \copy must be on one line.
    lines.append("\\" + copy_statement(stage, columns, source, freeze=True)
                 .replace("COPY", "copy", 1))
    lines += [f"{swap_statement(table, run)};", "COMMIT;", f"{drop_old_statement(table, run)};",
              ""]
    return "\n".join(lines)


def _copy_source(copy_file: str) -> str:
    """Return ``\\copy``'s source: the quoted file name, or ``PROGRAM 'gzip -dc …'`` etc."""
    if copy_file.endswith(".gz"):
        return f"PROGRAM 'gzip -dc {_sql_quote_path(copy_file)}'"
    if copy_file.endswith(".zst"):
        return f"PROGRAM 'zstd -dc {_sql_quote_path(copy_file)}'"
    return f"'{_sql_quote_path(copy_file)}'"


def _run_name(text: str) -> str:
    if not re.fullmatch(r"[A-Za-z0-9_.-]+", text):
        raise ValueError(f"run name {text!r}: use letters, digits, '_', '.', '-'")
    return text


def _sql_quote_path(path: str) -> str:
    if not re.fullmatch(r"[A-Za-z0-9_./-]+", path):
        raise ValueError(f"COPY file name {path!r}: use letters, digits, '_', '-', '.', '/'")
    return path
