"""The ``pbs-pro`` executor: submission, status polls, arrays, cancellation, re-attach.

See the package's README for what each setting does. The PBS logic is in the sibling
modules (standard library only); this module is the Snakemake side.
"""

import json
import os
import shlex
import subprocess
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

from snakemake_executor_plugin_pbs_pro import checks, job_status_query, submit_string
from snakemake_executor_plugin_pbs_pro.arrays import (
    ARRAY_DIR,
    batch_key,
    sha256,
    write_manifest,
)
from snakemake_executor_plugin_pbs_pro.cancel import cancel_jobs
from snakemake_executor_plugin_pbs_pro.configfile import ConfigFileError, pass_config_by_file
from snakemake_executor_plugin_pbs_pro.journal import Journal, outputs_of
from snakemake_executor_plugin_pbs_pro.state import STATE_DIR, marker_statuses


def _runner(cmd: list[str], timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)


# Settings keep typing.Optional: Snakemake's settings parser recognises typing.Union
# (Optional), not `X | None`, when it converts command-line values.
@dataclass
class ExecutorSettings(ExecutorSettingsBase):
    """Settings of ``--executor pbs-pro`` (profile keys ``pbs-pro-<name>``)."""

    queue: Optional[str] = field(
        default=None,
        metadata={"help": "Destination `queue` or `queue@server` (qsub -q); "
                  "$NCREEL_PBS_QUEUE overrides it.", "env_var": False, "required": False})
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
    # Jobs inherit the submitting environment (qsub -V): no `export VAR='value'` (quoted
    # with repr(), which /bin/sh re-parses) in each job's command and jobscript.
    pass_envvar_declarations_to_cmd=False,
    auto_deploy_default_storage_provider=False,
    init_seconds_before_status_checks=5,
)














class Executor(RemoteExecutor):
    """Submit Snakemake jobs to PBS Pro; watch them with one ``qstat`` per poll."""

    def __post_init__(self):
        s = self.workflow.executor_settings
        self.settings = s
        self.queue = os.environ.get("NCREEL_PBS_QUEUE") or s.queue
        try:
            self.account = checks.project_account(s.account_env, no_account=s.no_account)
            self.account_problem = None
        except checks.MissingAccount as err:
            self.account, self.account_problem = None, f"ncreel-pbs: error: {err}"
        self.array_rules = {r.strip() for r in (s.array_rules or "").split(",") if r.strip()}
        if s.job_overhead_mb is None or s.job_overhead_mb < 0:
            raise WorkflowError("pbs-pro-job-overhead-mb must be 0 or more (MB added to "
                                f"each job's mem request), got {s.job_overhead_mb}")
        if s.array_limit < 2:
            raise WorkflowError("pbs-pro-array-limit must be at least 2 (OpenPBS arrays "
                                "have 2 or more sub-jobs)")
        problem = checks.log_dir_problem(s.log_dir)
        if problem:
            raise WorkflowError(f"ncreel-pbs: error: {problem}")
        self._runner = _runner
        # Before any job: a qsub or qstat that is missing or not PBS Pro's would leave
        # jobs that this executor can never see finish.
        problem = job_status_query.pbs_pro_problem(runner=self._runner, attempts=s.qstat_attempts)
        if problem:
            raise WorkflowError(f"ncreel-pbs: error: {problem}")
        # Jobs load the --config values from a file instead of a command line that
        # Snakemake quotes with repr() and /bin/sh re-parses (ncreel's workflow does this
        # at parse time; here for any other workflow).
        try:
            pass_config_by_file(self.workflow.config_settings)
        except ConfigFileError as err:
            raise WorkflowError(f"ncreel-pbs: error: {err}") from None
        self._failed_polls = 0
        self.journal = Journal(Path(STATE_DIR) / "journal.jsonl")
        self._killed_runs_jobs = self.journal.open_jobs()

    # ----------------------------------------------------------------- submission

    def get_job_exec_prefix(self, job: JobExecutorInterface):
        """Jobs start in the run's working directory."""
        return f"cd {shlex.quote(self.workflow.workdir_init)}"

    def _qsub_kw(self) -> dict:
        s = self.settings
        return dict(queue=self.queue, account=self.account, log_dir=s.log_dir,
                    max_walltime=s.max_walltime, node_cores=s.node_cores,
                    node_mem_gb=s.node_mem_gb, job_overhead_mb=s.job_overhead_mb,
                    extra_l=[x for x in (s.extra_l or "").split(",") if x])

    def _qsub(self, cmd: list[str]) -> str:
        Path(self.settings.log_dir).mkdir(parents=True, exist_ok=True)
        return submit_string.run_qsub(cmd, runner=self._runner)

    def run_jobs(self, jobs: list[JobExecutorInterface]):
        """Submit the jobs Snakemake found ready: arrays for array rules, else one each."""
        if self.account_problem:
            # (ncreel's Snakefile says so once, before any job; other workflows learn here.)
            for job in jobs:
                self.report_job_error(SubmittedJobInfo(job), msg=self.account_problem)
            return
        jobs = self._reattach(jobs)
        batches: dict[tuple, list] = {}
        for job in jobs:
            if not job.is_group() and job.rule.name in self.array_rules:
                props = json.loads(job.properties())
                batches.setdefault(batch_key(props), []).append(job)
            else:
                self.run_job_pre(job)
                self.run_job(job)
        limit = self.settings.array_limit
        for batch in batches.values():
            for start in range(0, len(batch), limit):
                chunk = batch[start:start + limit]
                for job in chunk:
                    self.run_job_pre(job)
                if len(chunk) == 1:
                    self.run_job(chunk[0])
                else:
                    self.run_array(chunk)

    def run_job(self, job: JobExecutorInterface):
        """Submit one job (or group job) as a plain PBS job."""
        jobscript = self.get_jobscript(job)
        self.write_jobscript(job, jobscript)
        wrapper = submit_string.write_wrapper(jobscript, STATE_DIR)
        props = json.loads(job.properties())
        try:
            cmd = submit_string.build_qsub(props, str(wrapper), **self._qsub_kw())
            jobid = self._qsub(cmd)
        except (submit_string.QsubError, ValueError) as err:
            self.report_job_error(SubmittedJobInfo(job), msg=f"ncreel-pbs: error: {err}")
            return
        self.journal.write([{"submit": jobid, "outputs": list(outputs_of(job))}])
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
            cmd = submit_string.build_qsub(props, str(script), array_size=len(jobs), log_tag=tag,
                                 **self._qsub_kw())
            array_id = self._qsub(cmd)
        except (submit_string.QsubError, ValueError) as err:
            for job in jobs:
                self.report_job_error(SubmittedJobInfo(job), msg=f"ncreel-pbs: error: {err}")
            return
        self.journal.write([{"submit": array_id.replace("[]", f"[{i}]", 1),
                             "outputs": list(outputs_of(job))} for i, job in enumerate(jobs)])
        self.logger.info(f"Submitted {len(jobs)} {jobs[0].rule.name} jobs as PBS job array "
                         f"{array_id} (manifest {manifest}).")
        for index, job in enumerate(jobs):
            sub_id = array_id.replace("[]", f"[{index}]", 1)
            self.logger.info(f"Submitted job {job.jobid} with external jobid '{sub_id}'.")
            self.report_job_submission(SubmittedJobInfo(
                job, external_jobid=sub_id,
                aux={"array": array_id, "manifest": str(manifest),
                     "log": cmd[cmd.index("-o") + 1].replace("^array_index^", str(index))}))

    def _reattach(self, jobs: list[JobExecutorInterface]) -> list[JobExecutorInterface]:
        """Take over jobs a killed run left queued, running or finished successfully.

        A job the :class:`Journal` shows submitted by a run that never saw it end is
        asked about (one ``qstat`` for all): while PBS still runs it, or when it ended
        with ``Exit_status`` 0 and its outputs exist, it is reported as submitted instead
        of being submitted a second time. Returns the jobs that still need submitting.
        """
        recorded = {job: self._killed_runs_jobs[outputs_of(job)] for job in jobs
                    if outputs_of(job) in self._killed_runs_jobs}
        if not recorded:
            return jobs
        verdicts = job_status_query.statuses(list(recorded.values()), state_dir=STATE_DIR,
                                attempts=self.settings.qstat_attempts, runner=self._runner,
                                log=self.logger.debug)
        rest, given_up = [], []
        for job in jobs:
            jobid = recorded.get(job)
            verdict = verdicts.get(jobid)
            if verdict == "running" or (
                    verdict == "success" and all(os.path.exists(f) for f in job.output)):
                self.logger.info(f"Re-attaching job {job.jobid} to PBS job {jobid} of "
                                 "the killed run.")
                self.run_job_pre(job)
                self.report_job_submission(SubmittedJobInfo(job, external_jobid=jobid))
            else:
                rest.append(job)
                if jobid is not None:
                    given_up.append({"end": jobid})
            self._killed_runs_jobs.pop(outputs_of(job), None)
        self.journal.write(given_up)
        return rest

    # ----------------------------------------------------------------- status

    async def check_active_jobs(
        self, active_jobs: list[SubmittedJobInfo]
    ) -> AsyncGenerator[SubmittedJobInfo, None]:
        """One ``qstat`` call for all active jobs; report finished ones."""
        if not active_jobs:
            return
        ids = [j.external_jobid for j in active_jobs]
        async with self.status_rate_limiter:
            try:
                verdicts = job_status_query.statuses(ids, state_dir=STATE_DIR,
                                        attempts=self.settings.qstat_attempts,
                                        runner=self._runner, log=self.logger.warning,
                                        strict=True)
                self._failed_polls = 0
            except job_status_query.QstatUnusable as err:
                raise WorkflowError(self._qstat_gave_up(err, ids)) from None
            except job_status_query.QstatError as err:
                self._failed_polls += 1
                if self._failed_polls >= self.settings.qstat_failed_polls:
                    raise WorkflowError(self._qstat_gave_up(
                        f"{err} ({self._failed_polls} polls in a row)", ids)) from None
                self.logger.warning(
                    f"qstat keeps failing ({err}); poll {self._failed_polls} of "
                    f"{self.settings.qstat_failed_polls} before the run stops; jobs without "
                    "a recorded exit status stay running")
                verdicts = marker_statuses(ids, STATE_DIR)
        self.journal.write([{"end": j.external_jobid} for j in active_jobs
                            if verdicts[j.external_jobid] != "running"])
        for job_info in active_jobs:
            verdict = verdicts[job_info.external_jobid]
            if verdict == "success":
                self.report_job_success(job_info)
            elif verdict == "failed":
                log = (job_info.aux or {}).get("log", self.settings.log_dir)
                self.report_job_error(job_info, msg=f"PBS job {job_info.external_jobid} "
                                      f"failed; its PBS log: {log}. ")
            else:
                yield job_info

    def _qstat_gave_up(self, err, ids: list[str]) -> str:
        """Return the one line that stops the run when ``qstat`` cannot tell how jobs end."""
        shown = ", ".join(ids[:5]) + (f" and {len(ids) - 5} more" if len(ids) > 5 else "")
        return (f"ncreel-pbs: error: cannot follow the run's PBS jobs: {err}. Its jobs "
                f"({shown}) are left to PBS: run the same command again once `qstat -x -f "
                "-t <id>` works (it takes them over), or delete them with qdel.")

    def cancel_jobs(self, active_jobs: list[SubmittedJobInfo]):
        """``qdel`` every active job; a whole array once (``123[]``), not each sub-job."""
        ids = [j.external_jobid for j in active_jobs if j.external_jobid]
        self.journal.write([{"end": j} for j in ids])
        cancel_jobs(ids, runner=self._runner, log=self.logger.warning)
