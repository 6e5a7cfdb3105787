"""Slurm: checks of the environment before a run, and cancelling a dead run's jobs.

The Slurm profile takes the account and partition from ``SBATCH_ACCOUNT`` and
``SBATCH_PARTITION``, the variables ``sbatch`` itself reads. When they are unset, jobs go
to the user's default account and the cluster's default partition; if the cluster has no
such default, :func:`slurm_env_problem` says so in one line before anything is submitted,
instead of every ``sbatch`` failing with "Invalid account or account/partition
combination specified".
"""

from __future__ import annotations

import getpass
import os

from ncreel.cluster.commands import stdout_of as _out


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
    wanted = env.get("SBATCH_PARTITION")
    # --all: a hidden partition (Hidden=YES) still takes the jobs of those allowed in it.
    parts = run(["sinfo", "-h", "-o", "%P", *(["--all"] if wanted else [])])
    names = sorted({p.strip().rstrip("*") for p in (parts or "").split() if p.strip()})
    if not wanted:
        if parts is not None and "*" not in parts:
            problems.append("SBATCH_PARTITION is unset and the cluster has no default "
                            f"partition: export SBATCH_PARTITION=<one of: {', '.join(names)}>")
    elif names:
        # sbatch takes a comma-separated list; an unknown name failed every job's sbatch,
        # and each of its retries, instead of stopping the run once.
        unknown = [p for p in wanted.split(",") if p.strip() not in names]
        if unknown:
            problems.append(f"SBATCH_PARTITION names {unknown[0]!r}, which is not a partition "
                            f"of this cluster: export SBATCH_PARTITION=<one of: "
                            f"{', '.join(names)}>")
    return "; ".join(problems) or None


def cancel_orphan_slurm_jobs(workdir=".", run=_out, cancel=None, only=None) -> list[str]:
    """Cancel Slurm jobs that a killed Snakemake run submitted from `workdir`.

    Call only when that run is known to be dead (:func:`ncreel.cluster.runlock.clear_stale_lock`
    returned True). Its queued and running jobs would otherwise keep working on outputs the
    new run redoes anyway (Snakemake marked them incomplete), writing the same temporary
    files. Jobs are recognised by their working directory and the ``rule_...`` comment the
    Slurm executor plugin gives every job; nothing else is touched. PBS:
    :func:`ncreel.cluster.pbs.cancel_orphan_pbs_jobs`.

    Parameters
    ----------
    only : collection of str, optional
        Cancel only these job ids (the killed run's, when another run is live in
        `workdir`: :func:`ncreel.cluster.runstatus.run_job_ids`); default every match.

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
        if (wd and os.path.realpath(wd) == here and comment.startswith("rule_")
                and (only is None or jobid.strip() in only)):
            ids.append(jobid.strip())
    if ids:
        (cancel or (lambda i: run(["scancel", *i])))(ids)
    return ids


def see_cancelled_jobs(plugin=None) -> bool:
    """Make the Slurm executor plugin see a job cancelled with ``scancel`` as failed.

    ``sacct`` prints a cancelled job's state as ``CANCELLED by <uid>``; the plugin (2.8)
    compares the whole text with its failure states, so it takes the job as still running
    and the run waits for it for ever. This wraps the plugin's ``query_job_status`` (in
    the controller only) to keep each state's first word, as Slurm's state names are one
    word. Applied once; other states are unchanged.

    Parameters
    ----------
    plugin : module, optional
        ``snakemake_executor_plugin_slurm`` (imported when not given).

    Returns
    -------
    bool
        Whether the plugin's status query is wrapped (False if the plugin is missing or
        has no such function).
    """
    if plugin is None:
        try:
            import snakemake_executor_plugin_slurm as plugin
        except ImportError:
            return False
    query = getattr(plugin, "query_job_status", None)
    if query is None:
        return False
    if getattr(query, "ncreel_state_word", False):
        return True

    async def query_job_status(command, logger):
        status_of_jobs, duration = await query(command, logger)
        if status_of_jobs is not None:
            status_of_jobs = {job: state.split()[0] if state.strip() else state
                              for job, state in status_of_jobs.items()}
        return status_of_jobs, duration

    query_job_status.ncreel_state_word = True
    plugin.query_job_status = query_job_status
    return True
