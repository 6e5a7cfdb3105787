"""The load step: stream the run's COPY file into PostgreSQL with psycopg 3.

The table is partitioned by run, one partition per run. Create the table if missing
(serialised), then one transaction per run: create the run's new table, ``COPY … FROM
STDIN`` the file into it in fixed-size blocks (``FREEZE``), swap it in as the run's
partition, commit; or, with several connections, COPY the shard files into the new table
one committed transaction each, then swap. A rerun therefore replaces the run's rows and
never duplicates them, leaves no dead rows, and a failed load leaves the table untouched.
See :func:`load_copy`.
The password is never logged: connection strings are logged through :func:`safe_conninfo`.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Sequence

from ncreel.core.errors import NcreelError
from ncreel.pg.copytext import open_copy_reader
from ncreel.pg.sql import (
    SWAP_WAITED_SETTING,
    advisory_key,
    copy_statement,
    create_statement,
    drop_old_statement,
    identifier,
    load_statements,
    old_partition_query,
    older_table_message,
    partition_table_message,
    run_tables,
    stage_statement,
    swap_statement,
    table_name,
    view_table_message,
)

log = logging.getLogger(__name__)

#: Bytes handed to ``Copy.write`` at a time: large enough to amortise the per-call cost,
#: small enough to keep the job's memory flat.
BLOCK_BYTES = 4 * 2**20


def conninfo_for(*, url: str | None = None, service: str | None = None) -> str:
    """Build the connection string from config ``database.url`` or ``database.service``.

    Parameters
    ----------
    url : str, optional
        A libpq URI (``postgresql://user@host:5432/db``) or ``key=value`` string.
    service : str, optional
        A service name from ``~/.pg_service.conf`` / ``PGSERVICEFILE``.

    Returns
    -------
    str
        ``key=value`` conninfo; empty keys are left to libpq's environment defaults
        (``PGHOST``, ``PGPASSWORD``, ``~/.pgpass``, …).

    Raises
    ------
    NcreelError
        Neither or both given, or an unparseable URL (the message omits the URL).
    """
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    if bool(url) == bool(service):
        raise NcreelError("config key 'database': set exactly one of url and service")
    if service:
        return make_conninfo(service=service)
    try:
        return make_conninfo(**conninfo_to_dict(url))
    except Exception as err:  # psycopg.ProgrammingError; its text may echo the URL
        # from None: psycopg's message may quote the URL, password included.
        raise NcreelError("config key 'database.url': not a valid libpq URL or key=value "
                          f"string ({type(err).__name__})") from None


def split_password(conninfo: str) -> tuple[str, str | None]:
    """Split a password out of a conninfo string.

    Returns
    -------
    conninfo : str
        Without ``password``.
    password : str or None
    """
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    d = conninfo_to_dict(conninfo)
    password = d.pop("password", None)
    return make_conninfo(**d), password


def job_conninfo(*, url: str | None = None, service: str | None = None) -> str:
    """Return the conninfo for the load job's params; refuse one that carries a password.

    Snakemake stores rule params in ``.snakemake/metadata`` and pickles the whole config
    into each job's script file, which a job killed with SIGKILL leaves behind; ``--config``
    values also show in ``ps``. So a password is never accepted from the config: libpq
    reads it itself in the job, from ``~/.pgpass``/``PGPASSFILE``, a service file or
    ``PGPASSWORD``.

    Returns
    -------
    str
        Conninfo without ``password``.

    Raises
    ------
    NcreelError
        As :func:`conninfo_for`, or the conninfo contains a password (the message says
        where to put it and never quotes it).
    """
    from ncreel.config.configcheck import PASSWORD_HELP

    conninfo, password = split_password(conninfo_for(url=url, service=service))
    if password is not None:
        raise NcreelError(f"config key 'database.url' contains a password: {PASSWORD_HELP}")
    return conninfo


def safe_conninfo(conninfo: str) -> str:
    """`conninfo` with any password replaced by ``***``, for logs and messages."""
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    d = conninfo_to_dict(conninfo)
    if "password" in d:
        d["password"] = "***"
    return make_conninfo(**d)


def load_copy(copy_path: str | os.PathLike | Sequence[str | os.PathLike], *, conninfo: str,
              table: str, run: str, columns: Sequence[Sequence[str]], jobs: int = 1,
              block_bytes: int = BLOCK_BYTES) -> dict:
    """Load one run's COPY file(s) into `table` as the run's partition, replacing its earlier one.

    `table` is partitioned by ``LIST (run)``, one partition per run, and created if missing
    (serialised by an advisory lock, in its own short transaction). The rows go into a new
    table shaped as the run's partition (``CHECK (run = …)`` matching the bound), which
    then replaces the run's earlier partition in one transaction (``DETACH``, ``ATTACH``:
    no validation scan, no ``DELETE``, no dead rows; the earlier partition is dropped after
    the commit). With ``jobs=1`` that
    transaction also creates the new table and COPYs the file(s) into it with ``FREEZE``;
    with ``jobs > 1`` the files are COPYed over `jobs` connections into the new table, one
    committed transaction per file (a killed load resumes with the files not yet staged),
    before the swap. Either way other sessions see the run's old rows or all its new ones,
    never a part or two copies; `table` is locked only at the swap (see
    :func:`ncreel.pg.sql.swap_statement`), which waits at most
    :data:`ncreel.pg.sql.SWAP_LOCK_TIMEOUT_MS` at a time for other sessions' locks
    and tries again, so a long query on `table` delays the swap, never the queries queued
    behind it.

    Parameters
    ----------
    copy_path : path or sequence of path
        ``cells.copy`` (or ``.copy.gz``/``.copy.zst``, decompressed while streaming), or the
        run's shard files in time order.
    conninfo : str
        libpq connection string; a password may come from it, ``PGPASSWORD`` or
        ``~/.pgpass`` and is never logged.
    table : str
        Target table (``schema.table`` allowed, any name PostgreSQL can hold: it is
        always quoted); created if missing with a leading ``run text NOT NULL`` column
        followed by `columns`, ``PARTITION BY LIST (run)``.
    run : str
        Run name stored in the ``run`` column.
    columns : sequence of (str, str)
        The COPY file's columns and PostgreSQL types.
    jobs : int
        Connections loading files at once (config ``database.jobs``).
    block_bytes : int
        Bytes per ``Copy.write`` call.

    Returns
    -------
    dict
        ``table``, ``run``, ``partition`` (its name), ``rows`` (loaded, from the server's
        row counts), ``replaced`` (rows of the run's earlier partition, dropped), ``bytes``
        (uncompressed, read in this call), ``jobs``, ``files``, ``resumed`` (files found
        already staged), ``seconds``, ``swap_seconds`` (from the swap attempt that got the
        lock on `table` to the commit: the longest that readers of `table` can have waited
        for the swap), ``swap_wait_seconds`` (earlier attempts that gave way to other
        sessions' locks).

    Raises
    ------
    NcreelError
        Cannot connect, the connection is lost (server shut down: the message says what was
        committed and to rerun), `table` exists but is not partitioned by run (made by an
        older ncreel) or its columns differ from `columns`, or the COPY fails (message has
        the server's reason and line). Nothing of the run becomes visible unless the whole
        load succeeds.
    """
    import psycopg

    paths = [os.fspath(copy_path)] if isinstance(copy_path, (str, os.PathLike)) else \
        [os.fspath(p) for p in copy_path]
    table_name(table)
    columns = [tuple(c) for c in columns]
    where = safe_conninfo(conninfo)
    what = f"loading {paths[0] if len(paths) == 1 else f'{len(paths)} files'} into {table}"
    started = time.perf_counter()
    conn = _connect(conninfo, where)
    try:
        check_server_version(conn.info.server_version, where)
        _check_table(conn, table, columns, exists_only=True)
        conn.execute(create_statement(table, columns))
        _check_table(conn, table, columns)
        if jobs <= 1 or len(paths) == 1:
            summary = _load_one_transaction(conn, paths, table, run, columns, block_bytes)
        else:
            summary = _load_staged(conn, conninfo, where, paths, table, run, columns, jobs,
                                   block_bytes)
        try:
            # The run's earlier partition, detached by the swap: its files are deleted
            # here, after the commit, with no lock on the table.
            conn.execute(drop_old_statement(table, run))
        except psycopg.Error as err:  # the run is loaded; the next load drops it
            log.warning("run %s is loaded, but its earlier partition, now %s, was not "
                        "dropped (%s); the run's next load drops it", run,
                        ".".join(run_tables(table, run)["old"]), " ".join(str(err).split()))
    except psycopg.Error as err:
        raise _load_error(err, conn, where, what) from None
    finally:
        conn.close()
    seconds = time.perf_counter() - started
    partition = ".".join(run_tables(table, run)["partition"])
    log.info("loaded %d rows of run %s into %s, partition %s (%s) in %.1f s over %d "
             "connection(s); replaced %d earlier rows (swap %.3f s)", summary["rows"], run,
             table, partition, where, seconds, summary["jobs"], summary["replaced"],
             summary["swap_seconds"])
    return {"table": table, "run": run, "partition": partition, **summary,
            "files": len(paths), "seconds": round(seconds, 3)}


#: Oldest PostgreSQL the load supports (``server_version_num``): 12 attaches a partition
#: with a SHARE UPDATE EXCLUSIVE lock, so readers of the table go on meanwhile.
MIN_SERVER_VERSION = 120000


def check_server_version(version: int, where: str) -> None:
    """Raise if the server (``server_version_num``, e.g. 150004) is older than PostgreSQL 12.

    Raises
    ------
    NcreelError
        One line naming the server's version and the oldest supported.
    """
    if version < MIN_SERVER_VERSION:
        raise NcreelError(f"database ({where}): PostgreSQL {version // 10000}.{version % 10000}"
                          f" is too old: ncreel's load needs PostgreSQL "
                          f"{MIN_SERVER_VERSION // 10000} or newer (ATTACH PARTITION without "
                          "blocking readers); load into a newer server")


def _connect(conninfo: str, where: str, autocommit: bool = True):
    import psycopg

    try:
        # UTF8 whatever the database's or PGCLIENTENCODING's: the COPY files are UTF-8, and
        # in a SQL_ASCII database (what initdb makes in the C locale) psycopg would read
        # text as bytes and refuse the table the load has just created.
        return psycopg.connect(conninfo, autocommit=autocommit, client_encoding="UTF8")
    except psycopg.Error as err:
        raise NcreelError(f"database ({where}): cannot connect: "
                          f"{str(err).strip().splitlines()[0]}") from None


def _load_error(err, conn, where: str, what: str, staged: str = "") -> NcreelError:
    """Return the user-facing error for a failed load; roll back unless the connection is gone.

    A lost connection (server shut down or restarted) must report the server's reason,
    not the ``the connection is lost`` that a rollback on it would raise.
    """
    reason = " ".join(str(err).split())[:500]
    if conn is not None and not conn.broken and not conn.closed:
        try:
            conn.rollback()
        except Exception:  # noqa: BLE001 - the original error is the one to report
            pass
    if conn is None or conn.broken or conn.closed:
        return NcreelError(f"database ({where}): connection lost while {what}: {reason}; "
                           f"nothing of this run was replaced{staged}: check the server is "
                           "running and accepting connections, then rerun")
    return NcreelError(f"database ({where}): {what} failed, nothing changed: {reason}")


def _copy_files(cur, paths: Sequence[str], target, columns, block_bytes: int,
                freeze: bool = False) -> tuple[int, int]:
    """COPY each file into `target` (name parts) on cursor `cur`; return (rows, bytes)."""
    from psycopg import sql

    rows = n_bytes = 0
    stmt = sql.SQL(copy_statement(target, columns, freeze=freeze))
    for path in paths:
        with open_copy_reader(path) as src, cur.copy(stmt) as copy:
            while block := src.read(block_bytes):
                copy.write(block)
                n_bytes += len(block)
        rows += cur.rowcount
    return rows, n_bytes


def _swap(cur, table: str, run: str, tables: Sequence[str] | None = None
          ) -> tuple[int, float, float]:
    """Replace the run's partition by its new table (:func:`swap_statement`).

    Counts the earlier partition's rows first (a read, before any lock on `table`).

    Returns
    -------
    replaced : int
        Rows of the run's earlier partition (0 when there was none).
    attempt : float
        ``time.perf_counter()`` at the start of the swap's attempt that got the lock (by
        the server's count of the earlier attempts): from then to the commit the lock on
        `table` is asked for or held.
    waited : float
        Seconds of earlier attempts that gave way to other sessions' locks.
    """
    from psycopg import sql

    # The rows replaced are those of the last table (the normalised layout's values).
    old = cur.execute(old_partition_query((tables or [table])[-1], run)).fetchone()
    replaced = 0
    if old is not None:
        replaced = cur.execute(sql.SQL("SELECT count(*) FROM {}").format(
            sql.SQL(old[0]))).fetchone()[0]
    started = time.perf_counter()
    cur.execute(swap_statement(table, run, tables))
    waited = cur.execute("SELECT current_setting(%s)::float8", (SWAP_WAITED_SETTING,)
                         ).fetchone()[0]
    return replaced, started + waited, waited


def _load_one_transaction(conn, paths, table, run, columns, block_bytes) -> dict:
    stage = run_tables(table, run)["stage"]
    with conn.transaction(), conn.cursor() as cur:
        # Advisory lock, leftovers of a killed parallel load dropped, the new table made.
        for stmt in load_statements(table, columns, run):
            cur.execute(stmt)
        rows, n_bytes = _copy_files(cur, paths, stage, columns, block_bytes, freeze=True)
        replaced, swap_started, waited = _swap(cur, table, run)
    swap_seconds = time.perf_counter() - swap_started
    return {"rows": rows, "replaced": replaced, "bytes": n_bytes, "jobs": 1, "resumed": 0,
            "swap_seconds": round(swap_seconds, 4), "swap_wait_seconds": round(waited, 4)}


def _stage_names(table: str, run: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Return the run's new table and the parallel load's bookkeeping table (name parts)."""
    names = run_tables(table, run)
    return names["stage"], names["staged"]


def _fingerprint(path: str) -> str:
    st = os.stat(path)
    return f"{os.path.basename(path)}:{st.st_size}:{st.st_mtime_ns}"


def _load_staged(conn, conninfo, where, paths, table, run, columns, jobs, block_bytes) -> dict:
    """Parallel load: files into the run's new table, committed one by one, then the swap."""
    from psycopg import sql

    stage, done = _stage_names(table, run)
    st, dn = identifier(*stage), identifier(*done)
    # One load of this run at a time (session lock: held across the workers' commits).
    conn.execute(sql.SQL("SELECT pg_advisory_lock({})").format(advisory_key(table, run)))
    prints = {p: _fingerprint(p) for p in paths}
    staged = {}
    if conn.execute("SELECT relpersistence FROM pg_class WHERE oid = to_regclass(%s)",
                    (st.as_string(conn),)).fetchone() == ("p",) and conn.execute(
            "SELECT to_regclass(%s) IS NOT NULL", (dn.as_string(conn),)).fetchone()[0]:
        staged = dict(conn.execute(sql.SQL("SELECT file, rows FROM {}").format(dn)).fetchall())
    if not staged or set(staged) - set(prints.values()):
        # Nothing staged, or staged from other files (or by an older ncreel into an
        # unlogged table): start again, in a new table of this run's columns.
        conn.execute(sql.SQL("DROP TABLE IF EXISTS {}, {}").format(st, dn))
        conn.execute(stage_statement(table, columns, run))
        conn.execute(sql.SQL("CREATE TABLE {} (file text PRIMARY KEY, rows bigint NOT NULL)")
                     .format(dn))
        staged = {}
    todo = [p for p in paths if prints[p] not in staged]

    def record(cur, path: str, rows: int) -> None:
        cur.execute(sql.SQL("INSERT INTO {} VALUES ({}, {})").format(
            dn, sql.Literal(prints[path]), sql.Literal(rows)))

    results = _copy_parallel(conninfo, where, todo, stage, columns, jobs, block_bytes,
                             table, after=record,
                             kept="; files staged so far are kept and a rerun resumes after "
                                  "them")
    rows = sum(r for r, _ in results) + sum(staged.values())
    n_bytes = sum(b for _, b in results)
    with conn.transaction(), conn.cursor() as cur:
        replaced, swap_started, waited = _swap(cur, table, run)
        cur.execute(sql.SQL("DROP TABLE {}").format(dn))
    swap_seconds = time.perf_counter() - swap_started
    conn.execute(sql.SQL("SELECT pg_advisory_unlock_all()"))
    return {"rows": rows, "replaced": replaced, "bytes": n_bytes, "jobs": jobs,
            "resumed": len(paths) - len(todo), "swap_seconds": round(swap_seconds, 4),
            "swap_wait_seconds": round(waited, 4)}


def _check_table(conn, table: str, columns: Sequence[tuple[str, str]],
                 exists_only: bool = False) -> None:
    """Raise unless `table` is partitioned by ``LIST (run)`` with ``run`` + `columns`.

    With `exists_only`, a missing `table` passes (it is about to be created); the
    columns are compared by name, in any order (COPY names its columns, and ATTACH
    PARTITION matches them by name: the normalised layout's tables store them in
    :func:`ncreel.pg.layout.storage_order`, the wide table in the model's order).
    """
    reg = identifier(*table_name(table)).as_string(conn)
    found = conn.execute("SELECT relkind, CASE relkind WHEN 'p' THEN pg_get_partkeydef(oid) "
                         "END, (SELECT inhparent::regclass::text FROM pg_inherits WHERE "
                         "inhrelid = oid) FROM pg_class WHERE oid = to_regclass(%s)",
                         (reg,)).fetchone()
    if found is None and exists_only:
        return
    if found is not None and found[2] is not None:
        # Another table's run partition (<table>$<run>), not a table made by an older ncreel.
        raise NcreelError(partition_table_message(table, found[2]))
    if found is not None and found[0] == "v":
        raise NcreelError(view_table_message(table))
    if found is None or found[0] != "p" or found[1] != "LIST (run)":
        raise NcreelError(older_table_message(table) if found is None or found[0] == "r" else
                          f"table {table} exists but is not a table partitioned by LIST "
                          f"(run) (it is relkind '{found[0]}', {found[1] or 'not partitioned'})"
                          ": set config key 'table' to a new name")
    cur = conn.execute("SELECT attname FROM pg_attribute WHERE attrelid = %s::regclass "
                       "AND attnum > 0 AND NOT attisdropped ORDER BY attnum", (reg,))
    have = [r[0] for r in cur.fetchall()]
    want = ["run", *(n for n, _ in columns)]
    if sorted(have) != sorted(want):
        raise NcreelError(f"table {table} exists with columns ({', '.join(have)}), but this "
                          f"run writes ({', '.join(want)}): set config key 'table' to a new "
                          "name, or drop the table")


def load_normalised(files: dict, *, conninfo: str, table: str, run: str,
                    columns: Sequence[Sequence[str]], jobs: int = 1,
                    block_bytes: int = BLOCK_BYTES) -> dict:
    """Load one run in the normalised layout: its cells, steps and values partitions at once.

    The tables and the view `table` are created where missing (:mod:`ncreel.pg.layout`),
    then the run's three new tables are filled with ``COPY`` (``FREEZE`` with one
    connection), given their keys and indexes (:func:`ncreel.pg.layout.index_statements`)
    and swapped in as the run's partitions in one transaction, as :func:`load_copy`
    does for the wide table: other sessions see the run's old rows or all its new ones,
    a killed load attaches nothing, and the shared tables are locked only at the swap.

    Parameters
    ----------
    files : dict
        ``cells``, ``steps``: a COPY file each (``.gz``/``.zst`` decompressed while
        streaming); ``values``: one file, or the run's shard files in time order.
    conninfo, table, run, jobs, block_bytes
        As :func:`load_copy`; ``table`` names the view. With ``jobs > 1`` and several
        values files, these are COPYed over `jobs` connections into the run's new
        values table (each committed), and the keys and swap follow in one transaction.
    columns : sequence of (str, str)
        The wide layout's columns (:func:`ncreel.pg.layout.split_columns` splits them).

    Returns
    -------
    dict
        As :func:`load_copy`, ``rows`` counting the values rows, plus ``cells`` and
        ``steps`` (rows of those tables) and ``layout``.

    Raises
    ------
    NcreelError
        As :func:`load_copy`; and `table` exists but is not a view (a wide table).
    """
    import psycopg
    from psycopg import sql

    from ncreel.pg import layout

    columns = [tuple(c) for c in columns]
    split = layout.split_columns(columns)
    names = layout.layout_tables(table)
    tables = [names[k] for k in layout.KINDS]
    values = files["values"]
    values = [os.fspath(values)] if isinstance(values, (str, os.PathLike)) else \
        [os.fspath(p) for p in values]
    where = safe_conninfo(conninfo)
    what = f"loading run {run} into {', '.join(tables)}"
    started = time.perf_counter()
    conn = _connect(conninfo, where)
    stage = {k: run_tables(names[k], run)["stage"] for k in layout.KINDS}
    try:
        check_server_version(conn.info.server_version, where)
        for k in layout.KINDS:
            _check_table(conn, names[k], split[k], exists_only=True)
        conn.execute(layout.create_statement(table, columns))
        for k in layout.KINDS:
            _check_table(conn, names[k], split[k])
        counts = {}
        n_bytes = 0
        parallel = jobs > 1 and len(values) > 1
        if parallel:
            # Session lock: one load of this run at a time across the workers' commits.
            conn.execute(sql.SQL("SELECT pg_advisory_lock({})").format(
                advisory_key(table, run)))
            with conn.transaction():
                for stmt in layout.load_statements(table, columns, run):
                    conn.execute(stmt)
            results = _copy_parallel(conninfo, where, values, stage["values"],
                                     split["values"], jobs, block_bytes, table)
            counts["values"] = sum(r for r, _ in results)
            n_bytes += sum(b for _, b in results)
        with conn.transaction(), conn.cursor() as cur:
            for stmt in layout.load_statements(table, columns, run, create_stage=not parallel):
                cur.execute(stmt)
            for kind in ("cells", "steps") if parallel else layout.KINDS:
                paths = values if kind == "values" else [os.fspath(files[kind])]
                # FREEZE only into tables created in this transaction.
                rows, b = _copy_files(cur, paths, stage[kind], split[kind], block_bytes,
                                      freeze=not parallel)
                counts[kind] = rows
                n_bytes += b
            for stmt in layout.index_statements(table, columns, run):
                cur.execute(stmt)
            replaced, swap_started, waited = _swap(cur, table, run, tables)
        swap_seconds = time.perf_counter() - swap_started
        if parallel:
            conn.execute("SELECT pg_advisory_unlock_all()")
        try:
            conn.execute(drop_old_statement(table, run, tables))
        except psycopg.Error as err:  # the run is loaded; the next load drops them
            log.warning("run %s is loaded, but its earlier partitions were not dropped (%s); "
                        "the run's next load drops them", run, " ".join(str(err).split()))
    except psycopg.Error as err:
        raise _load_error(err, conn, where, what) from None
    finally:
        conn.close()
    seconds = time.perf_counter() - started
    log.info("loaded run %s into %s: %d cells, %d steps, %d values rows (%s) in %.1f s; "
             "replaced %d earlier rows (swap %.3f s)", run, ", ".join(tables), counts["cells"],
             counts["steps"], counts["values"], where, seconds, replaced, swap_seconds)
    return {"table": table, "run": run, "layout": "normalised",
            "partition": ".".join(run_tables(names["values"], run)["partition"]),
            "rows": counts["values"], "cells": counts["cells"], "steps": counts["steps"],
            "replaced": replaced, "bytes": n_bytes, "jobs": jobs if parallel else 1,
            "files": len(values) + 2, "resumed": 0, "seconds": round(seconds, 3),
            "swap_seconds": round(swap_seconds, 4), "swap_wait_seconds": round(waited, 4)}


def _copy_parallel(conninfo, where, paths, target, columns, jobs, block_bytes, table, *,
                   after=None, kept: str = "") -> list[tuple[int, int]]:
    """Return (rows, bytes) of each of `paths` COPYed into `target` over `jobs` connections.

    One committed transaction per file; ``after(cur, path, rows)`` runs in it.
    """
    from concurrent.futures import ThreadPoolExecutor

    import psycopg

    def load_file(path: str) -> tuple[int, int]:
        wconn = _connect(conninfo, where, autocommit=False)
        try:
            with wconn.cursor() as cur:
                counts = _copy_files(cur, [path], target, columns, block_bytes)
                if after is not None:
                    after(cur, path, counts[0])
            wconn.commit()
            return counts
        except psycopg.Error as err:
            raise _load_error(err, wconn, where, f"staging {path} for {table}", kept) from None
        finally:
            wconn.close()

    with ThreadPoolExecutor(max_workers=jobs) as pool:
        return list(pool.map(load_file, paths))


def write_summary(summary: dict, path: str | os.PathLike) -> None:
    """Write the load summary as JSON (the rule's output marker)."""
    import json

    from ncreel.core.io import atomic_path

    with atomic_path(path) as tmp:
        tmp.write_text(json.dumps(summary, indent=2) + "\n")
