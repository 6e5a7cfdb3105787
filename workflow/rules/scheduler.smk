# Checks for runs through a batch scheduler (profiles/slurm, profiles/cheyenne|derecho|casper).
import os

from ncreel.cluster.pbs import (  # noqa: E402
    ACCOUNT_ENV,
    MissingAccount,
    profile_queue,
    project_account,
    queue_problem,
)
from ncreel.cluster.slurm import slurm_env_problem  # noqa: E402


onstart:
    # Before anything is submitted: a Slurm run needs an account and a partition, from
    # SBATCH_ACCOUNT/SBATCH_PARTITION or the cluster's defaults.
    _plugin = workflow.executor_plugin
    if (
        _plugin is not None
        and _plugin.common_settings.non_local_exec
        and _plugin.name.endswith("slurm")
    ):
        _problem = slurm_env_problem()
        if _problem:
            fail(_problem)
    # PBS profiles (the pbs-pro executor, or cluster-generic + ncreel_pbs submit): a
    # project account is required by NCAR's qsub; say so once, before the first
    # submission, not once per failed job.
    _pbs = _plugin is not None and (
        _plugin.name == "pbs-pro"
        or (
            _plugin.name == "cluster-generic"
            and "ncreel_pbs" in str(workflow.executor_settings.submit_cmd)
        )
    )
    if _pbs:
        try:
            project_account(
                getattr(workflow.executor_settings, "account_env", ACCOUNT_ENV),
                no_account=getattr(workflow.executor_settings, "no_account", False),
            )
        except MissingAccount as _err:
            fail(str(_err))
    # ...and a queue the server knows (qsub would otherwise fail once per job).
    if _pbs:
        if _plugin.name == "pbs-pro":
            _queue = (
                os.environ.get("NCREEL_PBS_QUEUE")
                or workflow.executor_settings.queue
            )
        else:
            _queue = profile_queue(str(workflow.executor_settings.submit_cmd))
        _problem = _queue and queue_problem(_queue)
        if _problem:
            fail(_problem)
