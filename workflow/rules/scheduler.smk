# Checks for runs through a batch scheduler (profiles/slurm, profiles/cheyenne|derecho|casper).
from ncreel.scheduler import slurm_env_problem  # noqa: E402


onstart:
    # Before anything is submitted: a Slurm run needs an account and a partition, from
    # SBATCH_ACCOUNT/SBATCH_PARTITION or the cluster's defaults.
    _plugin = workflow.executor_plugin
    if _plugin is not None and _plugin.common_settings.non_local_exec and _plugin.name.endswith("slurm"):
        _problem = slurm_env_problem()
        if _problem:
            fail(_problem)
