"""Which batch scheduler a run submits to: declared by its executor or its config."""

from __future__ import annotations

from ncreel.errors import NcreelError

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
