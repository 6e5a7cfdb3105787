"""Keep a PostgreSQL password in the environment out of what PBS shows every user.

A PBS Pro job's variables (``qsub -v``; the ``pbs-pro`` executor's, ncreel's
cluster-generic helper's) are in its ``Variable_List``, which ``qstat -f`` prints to
every user of the server while ``query_other_jobs`` is true (OpenPBS's default). So jobs
get only the variables they need, by name
(``snakemake_executor_plugin_pbs_pro.submit_string.JOB_ENV``), ``qsub`` runs without
``PGPASSWORD`` (``SECRET_ENV``), and ncreel writes the password nowhere: a
``load_database`` job on PBS reads it where libpq looks on the compute node,
``~/.pgpass`` (or ``PGPASSFILE``) or a service file. Slurm keeps a job's environment from
other users, so Slurm jobs inherit it as they are.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from ncreel.core.errors import NcreelError

#: The variable libpq reads a password from.
PASSWORD_ENV = "PGPASSWORD"


def pbs_password_note(database: Mapping | None, environ: Mapping | None = None,
                      home: str | os.PathLike | None = None) -> str | None:
    """Say, before the first PBS job, where the load job finds the database password.

    Parameters
    ----------
    database : mapping or None
        Config ``database`` (``url``, ``service``); without either nothing is loaded.
    environ : mapping, optional
        The controller's environment (default ``os.environ``).
    home : path, optional
        The home directory (default ``~``).

    Returns
    -------
    str or None
        A note line (it names files, never the password) when ``PGPASSWORD`` is set, the
        run loads a database and another password source exists; None when nothing is
        to be said.

    Raises
    ------
    NcreelError
        ``PGPASSWORD`` is the only password source of a run that loads a database: the
        PBS job would connect without it.
    """
    environ = os.environ if environ is None else environ
    if PASSWORD_ENV not in environ or not database or not (
            database.get("url") or database.get("service")):
        return None
    home = Path(os.path.expanduser("~") if home is None else home)
    sources = [Path(environ["PGPASSFILE"]) if environ.get("PGPASSFILE")
               else home / ".pgpass",
               Path(environ["PGSERVICEFILE"]) if environ.get("PGSERVICEFILE")
               else home / ".pg_service.conf"]
    found = [str(p) for p in sources if p.is_file()]
    why = (f"{PASSWORD_ENV} is not passed to PBS jobs (a job's variables are in its "
           "Variable_List, which qstat -f shows to every user)")
    if not found:
        raise NcreelError(f"{why}, so the load_database job would connect without a "
                          "password: put it in ~/.pgpass (chmod 600; a line "
                          "host:port:database:user:password), which libpq reads on the "
                          "compute node")
    return f"{why}; the load_database job reads the password from {' or '.join(found)}"
