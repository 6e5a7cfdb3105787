"""The load step: stream the run's COPY file into PostgreSQL with psycopg 3.

One transaction per run: create the table if missing, delete the run's earlier rows,
``COPY … FROM STDIN`` the file in fixed-size blocks, commit. A rerun therefore replaces
the run's rows and never duplicates them, and a failed load leaves the table untouched.
The password is never logged: connection strings are logged through :func:`safe_conninfo`.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Sequence

from ncreel.errors import NcreelError
from ncreel.pgcopy import (
    copy_statement,
    finish_statements,
    load_statements,
    open_copy_reader,
    table_name,
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
    from ncreel.configcheck import PASSWORD_HELP

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


def load_copy(copy_path: str | os.PathLike, *, conninfo: str, table: str, run: str,
              columns: Sequence[Sequence[str]], block_bytes: int = BLOCK_BYTES) -> dict:
    """Load one run's COPY file into `table`, replacing the run's earlier rows.

    Parameters
    ----------
    copy_path : path
        ``cells.copy`` (or ``.copy.gz``/``.copy.zst``, decompressed while streaming).
    conninfo : str
        libpq connection string; a password may come from it, ``PGPASSWORD`` or
        ``~/.pgpass`` and is never logged.
    table : str
        Target table (``schema.table`` allowed); created if missing with a leading
        ``run text NOT NULL`` column followed by `columns`.
    run : str
        Run name stored in the ``run`` column.
    columns : sequence of (str, str)
        The COPY file's columns and PostgreSQL types.
    block_bytes : int
        Bytes per ``Copy.write`` call.

    Returns
    -------
    dict
        ``table``, ``run``, ``rows`` (loaded, from the server's COPY row count),
        ``deleted`` (earlier rows of the run), ``bytes`` (uncompressed), ``seconds``.

    Raises
    ------
    NcreelError
        Cannot connect (message names host/db, never the password), the existing table's
        columns differ from `columns`, or the COPY fails (message has the server's reason
        and line); the transaction is rolled back in every case.
    """
    import psycopg
    from psycopg import sql

    table_name(table)
    columns = [tuple(c) for c in columns]
    where = safe_conninfo(conninfo)
    started = time.perf_counter()
    try:
        conn = psycopg.connect(conninfo, autocommit=False)
    except psycopg.Error as err:
        raise NcreelError(f"database ({where}): cannot connect: "
                          f"{str(err).strip().splitlines()[0]}") from None
    n_bytes = 0
    with conn:
        try:
            with conn.cursor() as cur:
                stmts = load_statements(table, columns, run)
                cur.execute(sql.SQL(stmts[0]))  # CREATE TABLE IF NOT EXISTS
                _check_table(cur, table, columns)
                cur.execute(sql.SQL(stmts[1]))  # DELETE the run's earlier rows
                deleted = cur.rowcount
                for stmt in stmts[2:]:
                    cur.execute(sql.SQL(stmt))
                with open_copy_reader(copy_path) as src, \
                        cur.copy(sql.SQL(copy_statement(table, columns))) as copy:
                    while block := src.read(block_bytes):
                        copy.write(block)
                        n_bytes += len(block)
                rows = cur.rowcount
                for stmt in finish_statements(table):
                    cur.execute(sql.SQL(stmt))
            conn.commit()
        except psycopg.Error as err:
            conn.rollback()
            raise NcreelError(f"database ({where}): loading {os.fspath(copy_path)} into "
                              f"{table} failed, nothing changed: "
                              f"{' '.join(str(err).split())[:500]}") from None
    seconds = time.perf_counter() - started
    log.info("loaded %d rows of run %s into %s (%s) in %.1f s; replaced %d earlier rows",
             rows, run, table, where, seconds, deleted)
    return {"table": table, "run": run, "rows": rows, "deleted": deleted, "bytes": n_bytes,
            "seconds": round(seconds, 3)}


def _check_table(cur, table: str, columns: Sequence[tuple[str, str]]) -> None:
    """Raise if an existing `table` does not have exactly ``run`` + `columns` (by name)."""
    cur.execute("SELECT attname FROM pg_attribute WHERE attrelid = %s::regclass "
                "AND attnum > 0 AND NOT attisdropped ORDER BY attnum", (table,))
    have = [r[0] for r in cur.fetchall()]
    want = ["run", *(n for n, _ in columns)]
    if have != want:
        raise NcreelError(f"table {table} exists with columns ({', '.join(have)}), but this "
                          f"run writes ({', '.join(want)}): set config key 'table' to a new "
                          "name, or drop the table")


def write_summary(summary: dict, path: str | os.PathLike) -> None:
    """Write the load summary as JSON (the rule's output marker)."""
    import json

    from ncreel.io import atomic_path

    with atomic_path(path) as tmp:
        tmp.write_text(json.dumps(summary, indent=2) + "\n")
