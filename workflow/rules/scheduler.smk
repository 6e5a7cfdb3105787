# Everything about batch schedulers (Slurm, PBS Pro), in one place: which one the run
# submits to (the executor's own, or config `scheduler` for a generic executor), the jobs
# a killed run left queued, and the checks made once before the first submission.
# (os, sys and fail come from common.smk: the rule files share one namespace.)
from ncreel.cluster.pbs import (
    ACCOUNT_ENV,
    MissingAccount,
    cancel_orphan_pbs_jobs,
    old_queue_env_problem,
    profile_queue,
    project_account,
    queue_problem,
)
from ncreel.cluster.runlock import CLEARED_ALL
from ncreel.cluster.runstatus import run_job_ids
from ncreel.cluster.schedulers import job_scheduler
from ncreel.cluster.secrets import pbs_password_note
from ncreel.cluster.slurm import (
    cancel_orphan_slurm_jobs,
    see_cancelled_jobs,
    slurm_env_problem,
)
from ncreel.core.errors import NcreelError
from ncreel.run.jobtext import envvar_problem, shell_unsafe

if STALE_LOCK_CLEARED:
    # The killed run's scheduler jobs still queued or running would redo work this run
    # redoes (each canceller looks only at jobs that run recorded). With another run live
    # in this directory, only the jobs recorded for this run's outputs are its.
    _only = None if STALE_LOCK_CLEARED == CLEARED_ALL else run_job_ids(".", RUN)
    for _id in cancel_orphan_slurm_jobs(".", only=_only):
        print(f"ncreel: cancelled Slurm job {_id} of the killed run", file=sys.stderr)
    for _id in cancel_orphan_pbs_jobs(".", only=_only):
        print(f"ncreel: deleted PBS job {_id} of the killed run", file=sys.stderr)


onstart:
    _plugin = workflow.executor_plugin
    _remote = _plugin is not None and _plugin.common_settings.non_local_exec
    try:
        _scheduler = job_scheduler(
            _plugin.name if _remote else None, config["scheduler"]
        )
    except NcreelError as err:
        fail(err)
    _settings = workflow.executor_settings
    # PBS jobs never get PGPASSWORD (qstat -f shows a job's variables to every user).
    if _scheduler == "pbs":
        try:
            _note = pbs_password_note(config.get("database"))
        except NcreelError as err:
            fail(err)
        if _note:
            print(f"ncreel: note: {_note}", file=sys.stderr)
    # Paths Snakemake writes into every scheduler job's shell command line (values and
    # inputs reach jobs by file and plain-named links instead: common.smk).
    _unsafe = _remote and shell_unsafe(
        [
            ("the working directory", os.getcwd()),
            ("the Snakefile", workflow.main_snakefile),
            *(("config file", f) for f in workflow.config_settings.configfiles),
        ]
    )
    if _unsafe:
        fail(_unsafe)
    if _remote and _plugin.common_settings.pass_envvar_declarations_to_cmd:
        _problem = envvar_problem(
            workflow.spawned_job_args_factory.envvars(), _plugin.name
        )
        if _problem:
            fail(_problem)
    # Slurm: an account and a partition, from SBATCH_ACCOUNT/SBATCH_PARTITION or the
    # cluster's defaults.
    if _scheduler == "slurm":
        _problem = slurm_env_problem()
        if _problem:
            fail(_problem)
    # The Slurm plugin would wait for ever for a job cancelled with scancel.
    if _remote and _plugin.name == "slurm":
        see_cancelled_jobs()
    # PBS: a project account is required by NCAR's qsub, and a queue the server knows;
    # said once, before the first submission, not once per failed job.
    if _scheduler == "pbs":
        _problem = old_queue_env_problem()
        if _problem:
            fail(_problem)
        try:
            project_account(
                getattr(_settings, "account_env", ACCOUNT_ENV),
                no_account=getattr(_settings, "no_account", False),
            )
        except MissingAccount as _err:
            fail(str(_err))
        if _plugin.name == "pbs-pro":
            # (Snakemake sets it from $SNAKEMAKE_PBS_PRO_QUEUE too.)
            _queue = _settings.queue
        else:  # ncreel_pbs.py under cluster-generic: its --queue option
            _queue = profile_queue(str(getattr(_settings, "submit_cmd", "")))
        _problem = _queue and queue_problem(_queue)
        if _problem:
            fail(_problem)
    controller_started()  # controller.smk
