"""Deleting jobs: the run's own (Ctrl-C), and those a killed run left behind.

Standard library only.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from pathlib import Path

from snakemake_executor_plugin_pbs_pro.job_status_query import array_parent
from snakemake_executor_plugin_pbs_pro.journal import Journal
from snakemake_executor_plugin_pbs_pro.state import STATE_DIR, legacy_dirs

#: The environment variable that sets the ``pbs-pro-queue`` setting (Snakemake's name for
#: it: ``SNAKEMAKE_<PLUGIN>_<SETTING>``).
QUEUE_ENV = "SNAKEMAKE_PBS_PRO_QUEUE"

#: Most job ids in one ``qdel`` call (keeps the command line short).
QDEL_BATCH = 100


def _run(cmd: list[str], timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)


def cancel_jobs(jobids: list[str], *, runner=_run, log=None) -> list[list[str]]:
    """``qdel`` `jobids`: each array once (``123[]``, not each sub-job), 100 ids per call.

    Parameters
    ----------
    jobids : list of str
        PBS job and sub-job ids (``123.server``, ``124[3].server``).
    runner : callable
        ``runner(argv, timeout=...) -> CompletedProcess`` (no shell).
    log : callable, optional
        Told of a ``qdel`` that could not run or failed.

    Returns
    -------
    list of list of str
        The ``qdel`` argument lists run.
    """
    ids = list(dict.fromkeys(array_parent(j) for j in jobids if j))
    calls = []
    for start in range(0, len(ids), QDEL_BATCH):
        cmd = ["qdel", *ids[start:start + QDEL_BATCH]]
        calls.append(cmd)
        try:
            proc = runner(cmd, timeout=60)
        except (subprocess.TimeoutExpired, OSError) as err:
            if log:
                log(f"qdel failed: {err}")
            continue
        if proc.returncode != 0 and log:
            log(f"qdel exit {proc.returncode}: {' '.join((proc.stderr or '').split())[:300]}")
    return calls


def stdout_of(cmd: list[str], timeout: float = 60) -> str | None:
    """Return the standard output of the argument list `cmd` (no shell).

    None when the program is not on PATH, fails or runs longer than `timeout` seconds.
    """
    if shutil.which(cmd[0]) is None:
        return None
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except (subprocess.TimeoutExpired, OSError):
        return None
    return proc.stdout if proc.returncode == 0 else None


def _pbs_active_jobs(run, servers=()) -> dict[str, dict] | None:
    """Queued, held and running jobs of the default PBS server and of `servers`."""
    jobs, answered = {}, False
    for where in (None, *servers):
        out = run(["qstat", "-f", "-F", "json", *([f"@{where}"] if where else [])])
        if out is None:
            continue
        try:
            jobs.update(json.loads(out).get("Jobs") or {})
            answered = True
        except (ValueError, AttributeError):
            continue
    return jobs if answered else None


def pbs_peer_servers(workdir=".", env=None) -> list[str]:
    """PBS servers a run in `workdir` may have sent jobs to, besides the default one.

    The servers named in the ``pbs-pro`` executor's journal (the suffix of each job id it
    recorded, ``123.casper-pbs``) and in ``$SNAKEMAKE_PBS_PRO_QUEUE`` (``queue@server``).
    NCAR's Casper and Derecho are separate PBS servers: the default one does not list
    the other's jobs.
    """
    env = os.environ if env is None else env
    servers = []
    queue = env.get(QUEUE_ENV) or ""
    if "@" in queue:
        servers.append(queue.split("@", 1)[1])
    state = Path(workdir, STATE_DIR)
    servers += Journal(state / "journal.jsonl",
                       [d / "journal.jsonl" for d in legacy_dirs(state)]).servers()
    return list(dict.fromkeys(servers))


def cancel_orphan_pbs_jobs(workdir=".", run=stdout_of, cancel=None, timeout=120.0,
                           poll=2.0, only=None) -> list[str]:
    """Delete PBS jobs that a killed Snakemake run submitted from `workdir`; wait for them.

    The caller must know the run is dead. Snakemake's jobs are recognised in ``qstat -f
    -F json`` (the queued, held and running jobs of the default server and of the peer
    servers the run used, :func:`pbs_peer_servers`) by ``Variable_List.PBS_O_WORKDIR``
    (where ``qsub`` ran) being `workdir` and by their submission naming a jobscript under
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
    only : collection of str, optional
        Delete only these job ids (a sub-job's id selects its array); default every
        match. For a killed run whose working directory another live run shares.

    Returns
    -------
    list of str
        The deleted job ids (as PBS names them, e.g. ``1234.desched1``).
    """
    peers = pbs_peer_servers(workdir)
    jobs = _pbs_active_jobs(run, peers)
    if not jobs:
        return []
    here = os.path.realpath(workdir)
    ids = []
    wanted = None if only is None else {array_parent(j) for j in only}
    for jobid, rec in jobs.items():
        if wanted is not None and array_parent(jobid) not in wanted:
            continue
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
        left = _pbs_active_jobs(run, peers)
        if left is None or not set(ids) & set(left):
            break
        time.sleep(poll)
    return ids
