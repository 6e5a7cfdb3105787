"""Checks made when the workflow runs through a batch scheduler (``profiles/slurm``).

The Slurm profile takes the account and partition from ``SBATCH_ACCOUNT`` and
``SBATCH_PARTITION``, the variables ``sbatch`` itself reads. When they are unset, jobs go
to the user's default account and the cluster's default partition; if the cluster has no
such default, :func:`slurm_env_problem` says so in one line before anything is submitted,
instead of every ``sbatch`` failing with "Invalid account or account/partition
combination specified".
"""

from __future__ import annotations

import getpass
import json
import os
import shutil
import subprocess
import time


def _out(cmd: list[str]) -> str | None:
    if shutil.which(cmd[0]) is None:
        return None
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    except (subprocess.TimeoutExpired, OSError):
        return None
    return proc.stdout if proc.returncode == 0 else None


def slurm_env_problem(env=None, run=_out) -> str | None:
    """Return a one-line problem with the Slurm account/partition settings, or None.

    Parameters
    ----------
    env : mapping, optional
        Environment (default ``os.environ``).
    run : callable
        ``run(argv) -> stdout or None`` (for tests).
    """
    env = os.environ if env is None else env
    problems = []
    if not env.get("SBATCH_ACCOUNT"):
        user = env.get("USER") or getpass.getuser()
        default = run(["sacctmgr", "-n", "-P", "show", "user", user, "format=DefaultAccount"])
        # sacctmgr answering with no default account means the cluster keeps accounts but
        # this user has none to fall back on. No answer: no accounting (no account needed).
        if default is not None and not default.strip():
            problems.append("SBATCH_ACCOUNT is unset and you have no default Slurm account: "
                            "export SBATCH_ACCOUNT=<account> (`sacctmgr show assoc "
                            f"user={user} format=account` lists yours)")
    if not env.get("SBATCH_PARTITION"):
        parts = run(["sinfo", "-h", "-o", "%P"])
        if parts is not None and "*" not in parts:
            names = ", ".join(sorted({p.strip() for p in parts.split() if p.strip()}))
            problems.append("SBATCH_PARTITION is unset and the cluster has no default "
                            f"partition: export SBATCH_PARTITION=<one of: {names}>")
    return "; ".join(problems) or None


def cancel_orphan_slurm_jobs(workdir=".", run=_out, cancel=None) -> list[str]:
    """Cancel Slurm jobs that a killed Snakemake run submitted from `workdir`.

    Call only when that run is known to be dead (:func:`ncreel.cluster.runlock.clear_stale_lock`
    returned True). Its queued and running jobs would otherwise keep working on outputs the
    new run redoes anyway (Snakemake marked them incomplete), writing the same temporary
    files. Jobs are recognised by their working directory and the ``rule_...`` comment the
    Slurm executor plugin gives every job; nothing else is touched. PBS:
    :func:`cancel_orphan_pbs_jobs`.

    Returns
    -------
    list of str
        The cancelled job ids.
    """
    out = run(["squeue", "-h", "--me", "-o", "%i|%Z|%k"])
    if not out:
        return []
    here = os.path.realpath(workdir)
    ids = []
    for line in out.splitlines():
        jobid, _, rest = line.partition("|")
        wd, _, comment = rest.partition("|")
        if wd and os.path.realpath(wd) == here and comment.startswith("rule_"):
            ids.append(jobid.strip())
    if ids:
        (cancel or (lambda i: run(["scancel", *i])))(ids)
    return ids


def _pbs_active_jobs(run) -> dict[str, dict] | None:
    out = run(["qstat", "-f", "-F", "json"])
    if out is None:
        return None
    try:
        return json.loads(out).get("Jobs") or {}
    except (ValueError, AttributeError):
        return None


def cancel_orphan_pbs_jobs(workdir=".", run=_out, cancel=None, timeout=120.0,
                           poll=2.0) -> list[str]:
    """Delete PBS jobs that a killed Snakemake run submitted from `workdir`; wait for them.

    The PBS counterpart of :func:`cancel_orphan_slurm_jobs`, with the same precondition
    (the run is known dead). Snakemake's jobs are recognised in ``qstat -f -F json`` (the
    server's queued, held and running jobs) by ``Variable_List.PBS_O_WORKDIR`` (where
    ``qsub`` ran) being `workdir` and by their submission naming a jobscript under
    ``.snakemake/`` (``Submit_arguments``), which every Snakemake executor writes there.
    Then ``qdel`` deletes them, and this waits until PBS no longer lists them (at most
    `timeout` seconds), so that no output is worked on by an old and a new job at once.

    Parameters
    ----------
    workdir : path
        The Snakemake working directory.
    run : callable
        ``run(argv) -> stdout or None`` (None: command missing or failed).
    cancel : callable, optional
        ``cancel(ids)``; default ``qdel <ids>``.
    timeout, poll : float
        Seconds to wait for the deleted jobs to leave, and between checks.

    Returns
    -------
    list of str
        The deleted job ids (as PBS names them, e.g. ``1234.desched1``).
    """
    jobs = _pbs_active_jobs(run)
    if not jobs:
        return []
    here = os.path.realpath(workdir)
    ids = []
    for jobid, rec in jobs.items():
        env = rec.get("Variable_List") or {}
        wd = env.get("PBS_O_WORKDIR", "") if isinstance(env, dict) else ""
        args = str(rec.get("Submit_arguments", ""))
        if wd and os.path.realpath(wd) == here and "/.snakemake/" in f"/{args}":
            ids.append(jobid)
    if not ids:
        return []
    (cancel or (lambda i: run(["qdel", *i])))(ids)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        left = _pbs_active_jobs(run)
        if left is None or not set(ids) & set(left):
            break
        time.sleep(poll)
    return ids
