"""Which batch scheduler a run submits to, and whether a batch job has ended.

The scheduler is declared by the run's executor or its config.
"""

from __future__ import annotations

import shutil
import subprocess

from ncreel.core.errors import NcreelError

#: Executor plugin -> the batch scheduler it submits to. A generic executor (e.g.
#: cluster-generic with ncreel_pbs.py) declares its scheduler in config ``scheduler``.
EXECUTOR_SCHEDULERS = {"slurm": "slurm", "pbs-pro": "pbs"}
#: Names of the schedulers in messages.
SCHEDULER_NAMES = {"slurm": "Slurm", "pbs": "PBS Pro"}


def job_scheduler(executor: str | None, declared: str | None = None) -> str | None:
    """Return the batch scheduler a run submits its jobs to: ``"slurm"``, ``"pbs"`` or None.

    Parameters
    ----------
    executor : str or None
        Name of the Snakemake executor plugin that runs jobs elsewhere (``slurm``,
        ``pbs-pro``, ``cluster-generic``...); None when jobs run locally.
    declared : str or None
        Config ``scheduler``: what a generic executor submits to; None leaves it to the
        executor (see :data:`EXECUTOR_SCHEDULERS`).

    Returns
    -------
    str or None
        None for local runs and for a generic executor that declares nothing.

    Raises
    ------
    NcreelError
        When `declared` contradicts the executor's own scheduler.
    """
    if executor is None:
        return None
    own = EXECUTOR_SCHEDULERS.get(executor)
    if declared is not None and own is not None and declared != own:
        raise NcreelError(f"config key 'scheduler': {declared}, but the {executor} executor "
                          f"submits to {SCHEDULER_NAMES[own]}: set scheduler={own} or leave "
                          "it unset")
    return declared or own


#: Slurm job states (sacct's first word) of a job that has ended.
SLURM_ENDED = frozenset({"BOOT_FAIL", "CANCELLED", "COMPLETED", "DEADLINE", "FAILED",
                         "NODE_FAIL", "OUT_OF_MEMORY", "PREEMPTED", "REVOKED", "TIMEOUT"})


def batch_job_ended(scheduler: str | None, jobid: str) -> bool:
    """Whether the scheduler says batch job `jobid` has ended, for sure.

    False whenever it cannot tell (its commands missing or failing), unlike
    :func:`ncreel.cluster.runstatus.scheduler_state`: a run whose controller job has
    ended is dead on every host.

    Parameters
    ----------
    scheduler : str or None
        ``"pbs"`` or ``"slurm"`` (:func:`ncreel.run.jobrecord.scheduler_job_id`).
    jobid : str
        The job id (``123.server``, ``123``).
    """
    if scheduler == "pbs":
        from ncreel.cluster import pbs

        qstat = pbs.find_qstat()
        if not qstat:
            return False
        try:  # a purged job (qstat: Unknown Job Id) is "failed": it ended long ago
            verdict = pbs.status(jobid, qstat=qstat, attempts=2, delay=1,
                                 log=lambda msg: None)
        except pbs.QstatUnusable:
            return False
        return verdict in ("success", "failed")
    if scheduler == "slurm" and shutil.which("sacct"):
        try:
            out = subprocess.run(["sacct", "-n", "-X", "-P", "-j", str(jobid), "-o", "State"],
                                 capture_output=True, text=True, timeout=60)
        except (OSError, subprocess.TimeoutExpired):
            return False
        words = out.stdout.split()
        return out.returncode == 0 and bool(words) and words[0] in SLURM_ENDED
    return False
