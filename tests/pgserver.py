"""A throw-away PostgreSQL server on a unix socket, for the tests and the benchmarks."""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path


def pg_bin(name: str) -> str:
    """Path of a PostgreSQL server program (the newest ``/usr/lib/postgresql/*/bin``, else PATH).

    Raises
    ------
    RuntimeError
        The program is not installed.
    """
    found = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))
    if found:
        return found[-1]
    exe = shutil.which(name)
    if exe is None:
        raise RuntimeError(f"PostgreSQL server program '{name}' not found: run `make sysdeps`")
    return exe


def postgis_package() -> str | None:
    """Debian package of PostGIS for the PostgreSQL server :func:`pg_bin` finds, or None
    when PostGIS is installed for it (``CREATE EXTENSION postgis`` then works in any
    database of a server from :func:`start_server`).

    Raises
    ------
    RuntimeError
        No PostgreSQL server is installed.
    """
    initdb = Path(pg_bin("initdb")).resolve()
    # /usr/lib/postgresql/<major>/bin/initdb -> <major>; its extensions are in
    # /usr/share/postgresql/<major>/extension (Debian's layout).
    major = initdb.parent.parent.name
    if (Path("/usr/share/postgresql") / major / "extension" / "postgis.control").exists():
        return None
    return f"postgresql-{major}-postgis-3" if major.isdigit() else "postgis"


def start_server(options: Sequence[str] = ()) -> tuple[dict, Callable[[], None]]:
    """Start a PostgreSQL server in a new temp dir; return its connection info and a stop function.

    initdb refuses to run as root, so as root the cluster is owned by the ``postgres``
    user (created by the Debian package) and commands run through ``runuser``.
    ``listen_addresses=''`` means no TCP port, so parallel runs never clash; ``fsync=off``
    because the data is thrown away.

    Parameters
    ----------
    options : sequence of str
        Extra ``name=value`` server settings.

    Returns
    -------
    info : dict
        ``host`` (the socket directory), ``user``, ``dbname``, ``conninfo``, and
        ``pg_ctl``: the command prefix controlling this server (append e.g. ``stop``).
    stop : callable
        Stops the server (immediate mode) and deletes its directory.
    """
    as_root = os.geteuid() == 0
    base = Path(tempfile.mkdtemp(prefix="ncreel-pg-"))
    data, sock = base / "data", base / "sock"
    sock.mkdir()
    prefix = ["runuser", "-u", "postgres", "--"] if as_root else []
    if as_root:
        shutil.chown(base, "postgres")
        shutil.chown(sock, "postgres")
    subprocess.run([*prefix, pg_bin("initdb"), "-D", str(data), "-A", "trust", "-U", "postgres",
                    "-E", "UTF8", "--locale=C.UTF-8"], check=True, capture_output=True)
    settings = ["listen_addresses=''", f"unix_socket_directories='{sock}'", "fsync=off",
                "full_page_writes=off", *options]
    subprocess.run([*prefix, pg_bin("pg_ctl"), "-D", str(data), "-w", "-l", str(base / "log"),
                    "-o", " ".join(f"-c {s}" for s in settings), "start"],
                   check=True, capture_output=True)
    info = {"host": str(sock), "user": "postgres", "dbname": "postgres",
            "conninfo": f"host={sock} user=postgres dbname=postgres",
            "pg_ctl": [*prefix, pg_bin("pg_ctl"), "-D", str(data)]}

    def stop() -> None:
        subprocess.run([*info["pg_ctl"], "-m", "immediate", "stop"], capture_output=True)
        shutil.rmtree(base, ignore_errors=True)
    return info, stop
