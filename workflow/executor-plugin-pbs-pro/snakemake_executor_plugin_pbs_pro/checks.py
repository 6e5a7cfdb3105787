"""Checks made before any job: the project account, the queue, the log directory.

A workflow can call them itself, once on the login node before a run (ncreel does).
Standard library only.
"""

from __future__ import annotations

import os
import subprocess
import time


def _run(cmd: list[str], timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)


#: Environment variable holding the project account (``qsub -A``) unless a profile names another.
ACCOUNT_ENV = "PBS_ACCOUNT"


class MissingAccount(RuntimeError):
    """The project account's environment variable is unset (its message says what to do)."""

def project_account(account_env: str = ACCOUNT_ENV, *, no_account: bool = False,
                    environ=None) -> str | None:
    """Return the project account for ``qsub -A``, from the environment variable `account_env`.

    The one place the account is checked: the ``qsub`` CLI, the ``pbs-pro`` executor
    plugin and the workflow's parse-time check all call it.

    Parameters
    ----------
    account_env : str
        Name of the environment variable (``PBS_ACCOUNT`` unless the profile says otherwise).
    no_account : bool
        The site needs no account: return None without looking.
    environ : mapping, optional
        Environment to read (default: ``os.environ``).

    Returns
    -------
    str or None
        The account, or None when `no_account`.

    Raises
    ------
    MissingAccount
        The variable is unset or empty and an account is needed.
    """
    if no_account:
        return None
    account = (os.environ if environ is None else environ).get(account_env)
    if not account:
        raise _missing_account(account_env)
    return account

def _missing_account(account_env: str) -> MissingAccount:
    return MissingAccount(f"{account_env} is unset: export {account_env}=<project code> "
                          "(NCAR: from `gladequota`/`sam`), then run the same command again")

def log_dir_problem(log_dir: str | os.PathLike) -> str | None:
    """One line refusing a relative `log_dir` that leads out of the working directory, or None.

    ``../..`` would scatter job logs (and the ``qsub`` records next to them) into other
    people's folders without a word; a directory outside is given as an absolute path.
    """
    text = os.fspath(log_dir)
    if not text.strip():
        return "pbs-pro-log-dir is empty: name a directory (default logs/pbs)"
    if os.path.isabs(text):
        return None
    norm = os.path.normpath(text)
    if norm == ".." or norm.startswith(".." + os.sep):
        return (f"pbs-pro-log-dir {text!r} leads out of the working directory: give a "
                f"directory inside it, or an absolute path ({os.path.abspath(text)}) if "
                "the logs belong there")
    return None

def queue_problem(queue: str, runner=_run, attempts: int = 3, delay: float = 2.0,
                  sleep=time.sleep) -> str | None:
    """One line saying that PBS does not know `queue` (``queue`` or ``queue@server``), or None.

    Asks ``qstat -Q <queue>``. PBS's "Unknown queue" and "illegal destination" answers are
    problems; so is a named ``@server`` that does not answer `attempts` times (pauses of
    `delay` x attempt seconds): its jobs could not be submitted or followed. A missing
    ``qstat`` or a default server that does not answer leaves the verdict to ``qsub`` and
    the executor's retries. The message lists the queues the server has.
    """
    _, _, server = queue.partition("@")
    for attempt in range(max(1, attempts)):
        if attempt:
            sleep(delay * attempt)
        try:
            proc = runner(["qstat", "-Q", queue], timeout=60)
        except (subprocess.TimeoutExpired, OSError):
            return None
        said = " ".join((proc.stderr or "").split())
        if proc.returncode == 0:
            return None
        if "illegal 'destination'" in said.lower() or "illegally formed" in said.lower():
            return (f"PBS queue {queue!r} is not a valid destination (qstat: {said}): set "
                    "SNAKEMAKE_PBS_PRO_QUEUE=<queue> or <queue>@<server>, or use the "
                    "profile of your site")
        if "unknown queue" in said.lower():
            break
        if not server:
            return None
    else:
        return (f"PBS server '{server}' of queue '{queue}' does not answer (qstat -Q said "
                f"{attempts} times: {said}): check the server name in SNAKEMAKE_PBS_PRO_QUEUE "
                "or pbs-pro-queue, or run the same command again when `qstat -Q @"
                f"{server}` answers")
    where = f"on PBS server '{server}'" if server else "on the PBS server"
    known = ""
    try:
        listed = runner(["qstat", "-Q", *([f"@{server}"] if server else [])], timeout=60)
        names = [ln.split()[0] for ln in listed.stdout.splitlines()[2:] if ln.strip()]
        known = f" (queues there: {', '.join(names)})" if names else ""
    except (subprocess.TimeoutExpired, OSError, IndexError):
        pass
    return (f"PBS queue '{queue}' does not exist {where}{known}: set "
            "SNAKEMAKE_PBS_PRO_QUEUE=<queue> or <queue>@<server>, or use the profile of "
            "your site")
