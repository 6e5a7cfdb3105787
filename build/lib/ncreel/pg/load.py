"""The load step: stream the run's COPY file into PostgreSQL with psycopg 3.

Create the table if missing (serialised), then one transaction per run: delete the run's
earlier rows, ``COPY … FROM STDIN`` the file in fixed-size blocks, commit; or, with several
connections, stage the shard files and replace the run's rows in one transaction. A rerun
therefore replaces the run's rows and never duplicates them, and a failed load leaves the
table untouched. See :func:`load_copy`.
The password is never logged: connection strings are logged through :func:`safe_conninfo`.
"""

from __future__ import annotations

import hashlib
import logging
import os
import time
from collections.abc import Sequence

from ncreel.errors import NcreelError
from ncreel.pg.copytext import (
    advisory_key,
    copy_statement,
    create_statement,
    identifier,
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


def load_copy(copy_path: str | os.PathLike | Sequence[str | os.PathLike], *, conninfo: str,
              table: str, run: str, columns: Sequence[Sequence[str]], jobs: int = 1,
              block_bytes: int = BLOCK_BYTES) -> dict:
    """Load one run's COPY file(s) into `table`, replacing the run's earlier rows.

    The table is created if missing (serialised by an advisory lock, in its own short
    transaction). With ``jobs=1`` one transaction deletes the run's earlier rows and
    COPYs the files; with ``jobs > 1`` the files are COPYed over `jobs` connections into an
    unlogged staging table, one committed transaction per file (a killed load resumes
    with the files not yet staged), then one transaction replaces the run's rows with the
    staged ones. Either way other sessions see the run's old rows or all its new ones,
    never a part or two copies; only row locks are taken on `table`, so readers are never
    blocked and loads of other runs never deadlock with this one.

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
        followed by `columns`.
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
        ``table``, ``run``, ``rows`` (loaded, from the server's row counts), ``deleted``
        (earlier rows of the run), ``bytes`` (uncompressed, read in this call), ``jobs``,
        ``files``, ``resumed`` (files found already staged), ``seconds``.

    Raises
    ------
    NcreelError
        Cannot connect, the connection is lost (server shut down: the message says what was
        committed and to rerun), the existing table's columns differ from `columns`, or the
        COPY fails (message has the server's reason and line). Nothing of the run becomes
        visible unless the whole load succeeds.
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
        conn.execute(create_statement(table, columns))
        _check_table(conn, table, columns)
        if jobs <= 1 or len(paths) == 1:
            summary = _load_one_transaction(conn, paths, table, run, columns, block_bytes)
        else:
            summary = _load_staged(conn, conninfo, where, paths, table, run, columns, jobs,
                                   block_bytes)
    except psycopg.Error as err:
        raise _load_error(err, conn, where, what) from None
    finally:
        conn.close()
    seconds = time.perf_counter() - started
    log.info("loaded %d rows of run %s into %s (%s) in %.1f s over %d connection(s); "
             "replaced %d earlier rows", summary["rows"], run, table, where, seconds,
             summary["jobs"], summary["deleted"])
    return {"table": table, "run": run, **summary, "files": len(paths),
            "seconds": round(seconds, 3)}


def _connect(conninfo: str, where: str, autocommit: bool = True):
    import psycopg

    try:
        return psycopg.connect(conninfo, autocommit=autocommit)
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


def _copy_files(cur, paths: Sequence[str], target, columns, block_bytes: int) -> tuple[int, int]:
    """COPY each file into `target` on cursor `cur`; return (rows, bytes)."""
    from psycopg import sql

    rows = n_bytes = 0
    stmt = sql.SQL(copy_statement(target, columns))
    for path in paths:
        with open_copy_reader(path) as src, cur.copy(stmt) as copy:
            while block := src.read(block_bytes):
                copy.write(block)
                n_bytes += len(block)
        rows += cur.rowcount
    return rows, n_bytes


def _load_one_transaction(conn, paths, table, run, columns, block_bytes) -> dict:
    from psycopg import sql

    stage, done = _stage_names(table, run)
    with conn.transaction(), conn.cursor() as cur:
        stmts = load_statements(table, columns, run)
        for stmt in stmts[:2]:  # SET LOCAL ncreel.run, the run's advisory lock
            cur.execute(stmt)
        # A staging table left by a killed parallel load of this run is obsolete now.
        cur.execute(sql.SQL("DROP TABLE IF EXISTS {}, {}").format(identifier(*stage),
                                                                  identifier(*done)))
        cur.execute(stmts[2])  # DELETE the run's earlier rows
        deleted = cur.rowcount
        rows, n_bytes = _copy_files(cur, paths, table, columns, block_bytes)
    return {"rows": rows, "deleted": deleted, "bytes": n_bytes, "jobs": 1, "resumed": 0}


def _stage_names(table: str, run: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Staging and bookkeeping table of (`table`, `run`), in `table`'s schema."""
    parts = table_name(table)
    h = hashlib.sha1(f"{table}\0{run}".encode()).hexdigest()[:16]
    return (*parts[:-1], f"ncreel_stage_{h}"), (*parts[:-1], f"ncreel_staged_{h}")


def _fingerprint(path: str) -> str:
    st = os.stat(path)
    return f"{os.path.basename(path)}:{st.st_size}:{st.st_mtime_ns}"


def _load_staged(conn, conninfo, where, paths, table, run, columns, jobs, block_bytes) -> dict:
    """Parallel load: files into an unlogged staging table, then one atomic replace."""
    from concurrent.futures import ThreadPoolExecutor

    import psycopg
    from psycopg import sql

    stage, done = _stage_names(table, run)
    st, dn, t = identifier(*stage), identifier(*done), identifier(*table_name(table))
    lit_run = sql.Literal(run)
    # One load of this run at a time (session lock: held across the workers' commits).
    conn.execute(sql.SQL("SELECT pg_advisory_lock({})").format(advisory_key(table, run)))
    conn.execute(sql.SQL("CREATE UNLOGGED TABLE IF NOT EXISTS {} (LIKE {} INCLUDING DEFAULTS)")
                 .format(st, t))
    conn.execute(sql.SQL("CREATE TABLE IF NOT EXISTS {} (file text PRIMARY KEY)").format(dn))
    staged = {r[0] for r in conn.execute(sql.SQL("SELECT file FROM {}").format(dn))}
    prints = {p: _fingerprint(p) for p in paths}
    if staged - set(prints.values()):  # staged from other files: start again
        conn.execute(sql.SQL("TRUNCATE {}, {}").format(st, dn))
        staged = set()
    todo = [p for p in paths if prints[p] not in staged]
    stage_name = ".".join(stage)

    def load_file(path: str) -> tuple[int, int]:
        wconn = _connect(conninfo, where, autocommit=False)
        try:
            with wconn.cursor() as cur:
                cur.execute(load_statements(table, columns, run)[0])  # SET LOCAL ncreel.run
                counts = _copy_files(cur, [path], stage_name, columns, block_bytes)
                cur.execute(sql.SQL("INSERT INTO {} VALUES ({})").format(dn, sql.Literal(
                    prints[path])))
            wconn.commit()
            return counts
        except psycopg.Error as err:
            raise _load_error(err, wconn, where, f"staging {path} for {table}",
                              "; files staged so far are kept and a rerun resumes "
                              "after them") from None
        finally:
            wconn.close()

    with ThreadPoolExecutor(max_workers=jobs) as pool:
        results = list(pool.map(load_file, todo))
    n_bytes = sum(b for _, b in results)
    with conn.transaction(), conn.cursor() as cur:
        cur.execute(sql.SQL("DELETE FROM {} WHERE {} = {}").format(t, identifier("run"), lit_run))
        deleted = cur.rowcount
        cols = sql.SQL(", ").join(identifier(n) for n in ["run", *(n for n, _ in columns)])
        cur.execute(sql.SQL("INSERT INTO {} ({}) SELECT {} FROM {}").format(t, cols, cols, st))
        rows = cur.rowcount
        cur.execute(sql.SQL("DROP TABLE {}, {}").format(st, dn))
    conn.execute(sql.SQL("SELECT pg_advisory_unlock_all()"))
    return {"rows": rows, "deleted": deleted, "bytes": n_bytes, "jobs": jobs,
            "resumed": len(paths) - len(todo)}


def _check_table(conn, table: str, columns: Sequence[tuple[str, str]]) -> None:
    """Raise if an existing `table` does not have exactly ``run`` + `columns` (by name)."""
    cur = conn.execute("SELECT attname FROM pg_attribute WHERE attrelid = %s::regclass "
                       "AND attnum > 0 AND NOT attisdropped ORDER BY attnum",
                       (identifier(*table_name(table)).as_string(conn),))
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
