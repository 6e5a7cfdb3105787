"""The ``pbs-pro`` executor: submission, status polls, arrays, cancellation, re-attach.

See the package's README for what each setting does. The PBS logic is in the sibling
modules (standard library only); this module is the Snakemake side.
"""

import json
import os
import shlex
import sys
import uuid
from collections.abc import AsyncGenerator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from snakemake_interface_common.exceptions import WorkflowError
from snakemake_interface_executor_plugins.executors.base import SubmittedJobInfo
from snakemake_interface_executor_plugins.executors.remote import RemoteExecutor
from snakemake_interface_executor_plugins.jobs import JobExecutorInterface
from snakemake_interface_executor_plugins.settings import (
    CommonSettings,
    ExecutorSettingsBase,
)

from snakemake_executor_plugin_pbs_pro import submit_string
from snakemake_executor_plugin_pbs_pro.arrays import ARRAY_DIR, batch_key, sha256, write_manifest
from snakemake_executor_plugin_pbs_pro.configfile import ConfigFileError, pass_config_by_file
from snakemake_executor_plugin_pbs_pro.journal import outputs_of
from snakemake_executor_plugin_pbs_pro.run import SAYS, PbsRun, RunStopped, SettingsError
from snakemake_executor_plugin_pbs_pro.state import STATE_DIR


# Settings keep typing.Optional: Snakemake's settings parser recognises typing.Union
# (Optional), not `X | None`, when it converts command-line values.
@dataclass
class ExecutorSettings(ExecutorSettingsBase):
    """Settings of ``--executor pbs-pro`` (profile keys ``pbs-pro-<name>``)."""

    queue: Optional[str] = field(
        default=None,
        metadata={"help": "Destination `queue` or `queue@server` (qsub -q); "
                  "$SNAKEMAKE_PBS_PRO_QUEUE overrides a profile's.", "env_var": True,
                  "required": False})
    account_env: str = field(
        default="PBS_ACCOUNT",
        metadata={"help": "Environment variable holding the project account (qsub -A).",
                  "env_var": False, "required": False})
    no_account: bool = field(
        default=False,
        metadata={"help": "Submit without -A (sites that need no account).",
                  "env_var": False, "required": False})
    max_walltime: Optional[str] = field(
        default=None,
        metadata={"help": "Queue walltime limit HH:MM:SS; longer runtimes are capped.",
                  "env_var": False, "required": False})
    node_cores: Optional[int] = field(
        default=None,
        metadata={"help": "Ask for whole nodes of this many cores (exclusive queues).",
                  "env_var": False, "required": False})
    node_mem_gb: Optional[int] = field(
        default=None,
        metadata={"help": "Memory of a whole node in GB (with node-cores).",
                  "env_var": False, "required": False})
    extra_l: Optional[str] = field(
        default=None,
        metadata={"help": "Extra comma-separated -l resources, e.g. job_priority=economy.",
                  "env_var": False, "required": False})
    log_dir: str = field(
        default="logs/pbs",
        metadata={"help": "Directory of the PBS job logs.", "env_var": False,
                  "required": False})
    array_rules: Optional[str] = field(
        default=None,
        metadata={"help": "Comma-separated rules whose ready jobs go out as PBS job "
                  "arrays (qsub -J), e.g. process_shard.", "env_var": False,
                  "required": False})
    array_limit: int = field(
        default=500,
        metadata={"help": "Most sub-jobs in one job array (site limit: max_array_size).",
                  "env_var": False, "required": False})
    job_overhead_mb: int = field(
        default=submit_string.DEFAULT_JOB_OVERHEAD_MB,
        metadata={"help": "MB added to each job's mem_mb in its PBS mem request: the "
                  "memory of the job's own Snakemake process, which PBS counts against "
                  f"the job (default {submit_string.DEFAULT_JOB_OVERHEAD_MB}, measured).",
                  "env_var": False, "required": False})
    qstat_attempts: int = field(
        default=4,
        metadata={"help": "Tries of a failing qstat per poll before waiting for the next.",
                  "env_var": False, "required": False})
    retry_deleted: bool = field(
        default=False,
        metadata={"help": "Resubmit a job deleted with qdel as Snakemake's retries allow "
                  "(default: a deleted job is not resubmitted and the run stops).",
                  "env_var": False, "required": False})
    env: Optional[str] = field(
        default=None,
        metadata={"help": "Comma-separated names (NAME* for a prefix) of environment "
                  "variables every job gets (qsub -v), beside the executor's own list "
                  "(PATH, LD_LIBRARY_PATH, the locale, PYTHON*, VIRTUAL_ENV, CONDA_*, "
                  "SNAKEMAKE_*) and --envvars; no job gets any other.",
                  "env_var": False, "required": False})
    qstat_failed_polls: int = field(
        default=20,
        metadata={"help": "Polls in a row whose qstat keeps failing before the run stops "
                  "(its jobs are left to PBS; the same command re-attaches to them).",
                  "env_var": False, "required": False})


common_settings = CommonSettings(
    non_local_exec=True,
    implies_no_shared_fs=False,
    job_deploy_sources=False,
    pass_default_storage_provider_args=True,
    pass_default_resources_args=True,
    # Jobs get the variables they need by name (qsub -v NAME, --envvars included): no
    # `export VAR='value'` (quoted with repr(), which /bin/sh re-parses) in each job's
    # command and jobscript.
    pass_envvar_declarations_to_cmd=False,
    auto_deploy_default_storage_provider=False,
    init_seconds_before_status_checks=5,
)


class Executor(RemoteExecutor):
    """Submit Snakemake jobs to PBS Pro; watch them with one ``qstat`` per poll.

    The PBS side (settings checks, journal, arrays, re-attach, polls, ``qdel``) is a
    :class:`~.run.PbsRun`, made here in the initialisation hook Snakemake calls.
    """

    def __post_init__(self):
        try:
            self.pbs = PbsRun(self.workflow.executor_settings, log=self.logger.warning,
                              envvars=self.envvars())
            # Jobs load the --config values from a file instead of a command line that
            # Snakemake quotes with repr() and /bin/sh re-parses.
            pass_config_by_file(self.workflow.config_settings)
        except (SettingsError, ConfigFileError) as err:
            msg = str(err)
            raise WorkflowError(msg if msg.startswith(SAYS) else f"{SAYS} {msg}") from None
        self.settings = self.pbs.settings
        self._said: set[str] = set()

    # ----------------------------------------------------------------- submission

    def get_job_exec_prefix(self, job: JobExecutorInterface):
        """Jobs start in the run's working directory."""
        return f"cd {shlex.quote(self.workflow.workdir_init)}"

    def _array_key(self, job: JobExecutorInterface):
        if job.is_group() or not self.pbs.is_array_rule(job.rule):
            return None
        return batch_key(json.loads(job.properties()))

    def run_jobs(self, jobs: list[JobExecutorInterface]):
        """Submit the jobs Snakemake found ready: arrays for array rules, else one each."""
        if self.pbs.account_problem:
            # (A workflow may say so once, before any job, with checks.project_account.)
            for job in jobs:
                self.report_job_error(SubmittedJobInfo(job), msg=self.pbs.account_problem)
            return
        jobs = self._refuse_deleted(jobs)
        taken, jobs = self.pbs.take_over(jobs)
        for job, jobid in taken.items():
            self.logger.info(f"Re-attaching job {job.jobid} to PBS job {jobid} of the "
                             "killed run.")
            self.run_job_pre(job)
            self.report_job_submission(SubmittedJobInfo(job, external_jobid=jobid))
        for batch in self.pbs.batches(jobs, self._array_key):
            for job in batch:
                self.run_job_pre(job)
            if len(batch) == 1:
                self.run_job(batch[0])
            else:
                self.run_array(batch)

    @staticmethod
    def _job_text(job: JobExecutorInterface) -> str:
        if job.is_group():
            return f"group job {job.jobid}"
        return f"rule {job.rule.name}, job {job.jobid}"

    def _refuse_deleted(self, jobs: list[JobExecutorInterface]
                        ) -> list[JobExecutorInterface]:
        """Fail at once, without ``qsub``, the next attempts of jobs deleted with qdel."""
        rest = []
        for job in jobs:
            line = self.pbs.refusal(outputs_of(job), self._job_text(job))
            if line is None:
                rest.append(job)
                continue
            if line not in self._said:
                self._said.add(line)
                self.logger.error(line)
            # (Snakemake appends its own sentence to the message.)
            self.report_job_error(SubmittedJobInfo(job), msg=f"{line} ")
        return rest

    def run_job(self, job: JobExecutorInterface):
        """Submit one job (or group job) as a plain PBS job."""
        jobscript = self.get_jobscript(job)
        self.write_jobscript(job, jobscript)
        wrapper = submit_string.write_wrapper(jobscript, STATE_DIR)
        props = json.loads(job.properties())
        try:
            cmd = submit_string.build_qsub(props, str(wrapper), **self.pbs.qsub_kw())
            jobid = self.pbs.qsub(cmd, {"": outputs_of(job)})
        except (submit_string.QsubError, ValueError) as err:
            self.report_job_error(SubmittedJobInfo(job), msg=f"{SAYS} {err}")
            return
        # Worded as Snakemake's cluster executors word it, so existing log readers work.
        self.logger.info(f"Submitted job {job.jobid} with external jobid '{jobid}'.")
        self.report_job_submission(SubmittedJobInfo(
            job, external_jobid=jobid, aux={"log": cmd[cmd.index("-o") + 1]}))

    def run_array(self, jobs: list[JobExecutorInterface]):
        """Submit `jobs` (same rule and resources, >= 2) as one PBS job array."""
        tag = uuid.uuid4().hex[:12]
        entries = []
        for index, job in enumerate(jobs):
            jobscript = os.path.abspath(self.get_jobscript(job))
            self.write_jobscript(job, jobscript)
            props = json.loads(job.properties())
            entries.append({"index": index, "jobid": props["jobid"], "rule": props["rule"],
                            "wildcards": props.get("wildcards") or {},
                            "jobscript": jobscript, "sha256": sha256(jobscript)})
        manifest = write_manifest(Path(ARRAY_DIR) / f"{tag}.json", entries).resolve()
        script = manifest.with_suffix(".sh")
        # The array's one script: every sub-job runs it; the runner picks the manifest
        # entry of PBS_ARRAY_INDEX and nothing else.
        script.write_text(
            "#!/bin/bash\n"
            f"exec {shlex.quote(sys.executable)} -m snakemake_executor_plugin_pbs_pro.subjob "
            f"{shlex.quote(str(manifest))}\n")
        script.chmod(0o755)
        props = json.loads(jobs[0].properties())
        props["wildcards"] = {}
        try:
            cmd = submit_string.build_qsub(props, str(script), array_size=len(jobs),
                                           log_tag=tag, **self.pbs.qsub_kw())
            array_id = self.pbs.qsub(cmd, {f"[{i}]": outputs_of(job)
                                           for i, job in enumerate(jobs)})
        except (submit_string.QsubError, ValueError) as err:
            for job in jobs:
                self.report_job_error(SubmittedJobInfo(job), msg=f"{SAYS} {err}")
            return
        self.logger.info(f"Submitted {len(jobs)} {jobs[0].rule.name} jobs as PBS job array "
                         f"{array_id} (manifest {manifest}).")
        for index, job in enumerate(jobs):
            sub_id = array_id.replace("[]", f"[{index}]", 1)
            self.logger.info(f"Submitted job {job.jobid} with external jobid '{sub_id}'.")
            self.report_job_submission(SubmittedJobInfo(
                job, external_jobid=sub_id,
                aux={"array": array_id, "manifest": str(manifest),
                     "log": cmd[cmd.index("-o") + 1].replace("^array_index^", str(index))}))

    # ----------------------------------------------------------------- status

    async def check_active_jobs(
        self, active_jobs: list[SubmittedJobInfo]
    ) -> AsyncGenerator[SubmittedJobInfo, None]:
        """One ``qstat`` call for all active jobs; report finished ones."""
        if not active_jobs:
            return
        async with self.status_rate_limiter:
            try:
                verdicts = self.pbs.poll([j.external_jobid for j in active_jobs])
            except RunStopped as err:
                raise WorkflowError(str(err)) from None
        for job_info in active_jobs:
            verdict = verdicts[job_info.external_jobid]
            if verdict == "success":
                self.report_job_success(job_info)
            elif verdict == "deleted":
                line = self.pbs.deleted_message(job_info.external_jobid,
                                                self._job_text(job_info.job),
                                                outputs_of(job_info.job))
                self.logger.error(line)
                self.report_job_error(job_info, msg=f"{line} ")
            elif verdict == "failed":
                log = (job_info.aux or {}).get("log", self.settings.log_dir)
                self.report_job_error(job_info, msg=f"PBS job {job_info.external_jobid} "
                                      f"failed; its PBS log: {log}. ")
            else:
                yield job_info

    def cancel_jobs(self, active_jobs: list[SubmittedJobInfo]):
        """``qdel`` every active job; a whole array once (``123[]``), not each sub-job."""
        self.pbs.cancel([j.external_jobid for j in active_jobs])
