"""Keep a PostgreSQL password in the environment out of what a scheduler shows.

PBS Pro's ``qsub -V`` (the ``pbs-pro`` executor's, ncreel's cluster-generic helper's)
copies the whole environment into the job's ``Variable_List``, which ``qstat -f`` prints
to every user of the cluster while the server's ``query_other_jobs`` is true (OpenPBS's
default); Slurm stores the exported environment with the job. So a ``PGPASSWORD`` the user
exported would be readable by anyone running ``qstat -f`` on any of the run's jobs.
Before the first submission, :func:`password_to_private_file` moves it into a password
file only its owner can read, which libpq reads in the load job through ``PGPASSFILE``.
"""

from __future__ import annotations

import os
from pathlib import Path

from ncreel.errors import NcreelError

#: The variable libpq reads a password from, and the file ncreel moves it to.
PASSWORD_ENV, PASSFILE_ENV = "PGPASSWORD", "PGPASSFILE"
PASSFILE = Path(".snakemake") / "ncreel" / "pgpass"


def passfile(run: str) -> Path:
    """Return the password file of run `run`, relative to the working directory.

    One per run: runs of one working directory may run at once with different passwords.
    """
    return PASSFILE.with_name(f"pgpass-{run}")


def pgpass_line(password: str) -> str:
    """One ``~/.pgpass`` line giving `password` for every host, port, database and user.

    ``:`` and ``\\`` in the password are escaped with ``\\`` (PostgreSQL's "The Password
    File"); a line cannot hold a newline.
    """
    return "*:*:*:*:" + password.replace("\\", "\\\\").replace(":", "\\:") + "\n"


def password_to_private_file(env: dict | None = None, workdir: str | os.PathLike = ".",
                             run: str = "demo") -> str | None:
    """Move ``PGPASSWORD`` from `env` into a private password file named by ``PGPASSFILE``.

    The file (``.snakemake/ncreel/pgpass-<run>`` in `workdir`, mode 600, as libpq requires) is
    rewritten on every call; jobs inherit ``PGPASSFILE`` (its absolute path) instead of
    the password. Call in Snakemake's main process before the first job is submitted to
    a scheduler.

    Parameters
    ----------
    env : dict, optional
        The environment to change (default ``os.environ``).
    workdir : path
        Snakemake's working directory.
    run : str
        The run's name (config key ``run``): the file is the run's own (:func:`passfile`).

    Returns
    -------
    str or None
        A note line for the user (it names the file, never the password); None when
        ``PGPASSWORD`` is not set.

    Raises
    ------
    NcreelError
        ``PGPASSWORD`` holds a newline or a NUL, which a password file cannot hold.
    """
    env = os.environ if env is None else env
    password = env.get(PASSWORD_ENV)
    if password is None:
        return None
    if "\n" in password or "\r" in password or "\0" in password:
        raise NcreelError(f"{PASSWORD_ENV} holds a line break: a password file cannot hold "
                          "it, and the scheduler would show it to every user; put the "
                          "password in ~/.pgpass or a service file instead")
    path = Path(workdir, passfile(run)).resolve()
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.fchmod(fd, 0o600)  # an older file keeps its mode through O_CREAT
        os.write(fd, pgpass_line(password).encode())
    finally:
        os.close(fd)
    env[PASSFILE_ENV] = str(path)
    del env[PASSWORD_ENV]
    return (f"{PASSWORD_ENV} reaches the jobs in {passfile(run)} (mode 600, through "
            f"{PASSFILE_ENV}), not in their environment, which the scheduler shows to other "
            "users (qstat -f)")
