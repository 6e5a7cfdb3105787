"""Snakemake executor plugin for PBS Pro (``--executor pbs-pro``), shipped with ncreel.

Every job is submitted with ``qsub`` (an argument list, never a shell string); its
command holds no ``--config`` value and no environment value (they reach the job in a
file, :mod:`ncreel.jobtext`, and through ``qsub -V``):
``-l select=1:ncpus={threads}:mem={mem_mb + overhead}MB,walltime=...`` from the job's
``threads``, ``mem_mb`` and ``runtime`` (``overhead``: the job's own Snakemake process,
``--pbs-pro-job-overhead-mb``, :func:`ncreel.cluster.pbs.request_mem_mb`),
``-A $PBS_ACCOUNT``, ``-q queue[@server]``, a sanitised job name and a joined log under
``logs/pbs/`` (:func:`ncreel.cluster.pbs.build_qsub`).

Ready jobs of the rules named in ``--pbs-pro-array-rules`` that ask for the same
resources go out as ONE job array per batch (``qsub -J 0-(N-1)``, at most
``--pbs-pro-array-limit`` sub-jobs). Each sub-job runs :mod:`.subjob`, which reads the
entry of its own ``PBS_ARRAY_INDEX`` from the batch's manifest and refuses anything else.
A batch of one job is a plain job (OpenPBS refuses ``-J`` ranges of one sub-job).

All active jobs are checked with ONE ``qstat -x -f -t <ids>`` per poll
(:func:`ncreel.cluster.pbs.statuses`; the text form, because OpenPBS 23.06 prints only the first
of several jobs with ``-F json``: ``Exit_status`` 0 is success; −27 memory, −29 walltime,
265/271 signals and any other value are failures; ``qstat`` hiccups are retried; purged
jobs are decided by the exit status their wrapper recorded). Sub-jobs are mapped back
to their Snakemake job, so a failed shard is retried alone. Ctrl-C deletes the run's
jobs and arrays (``qdel``). A run started again after a killed one re-attaches to the
killed run's jobs that are still queued, running, or finished successfully, instead of
submitting them twice.
"""

import hashlib
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

from ncreel.cluster import pbs
from ncreel.errors import NcreelError
from ncreel.jobtext import pass_config_by_file
from snakemake_interface_common.exceptions import WorkflowError
from snakemake_interface_executor_plugins.executors.base import SubmittedJobInfo
from snakemake_interface_executor_plugins.executors.remote import RemoteExecutor
from snakemake_interface_executor_plugins.jobs import JobExecutorInterface
from snakemake_interface_executor_plugins.settings import (
    CommonSettings,
    ExecutorSettingsBase,
)

#: Where manifests of job arrays are written (relative to the working directory).
ARRAY_DIR = f"{pbs.STATE_DIR}/arrays"


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
        default=pbs.DEFAULT_JOB_OVERHEAD_MB,
        metadata={"help": "MB added to each job's mem_mb in its PBS mem request: the "
                  "memory of the job's own Snakemake process, which PBS counts against "
                  f"the job (default {pbs.DEFAULT_JOB_OVERHEAD_MB}, measured).",
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


def _runner(cmd: list[str], timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)


def batch_key(props: dict) -> tuple:
    """Jobs with equal keys can share one job array (same rule and resource request)."""
    res = props.get("resources") or {}
    return (props.get("rule"), props.get("threads"), res.get("mem_mb"), res.get("runtime"))


def sha256(path: str | os.PathLike) -> str:
    """Hex SHA-256 of a file's bytes."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def write_manifest(path: str | os.PathLike, entries: list[dict]) -> Path:
    """Write an array batch's manifest: entry ``i`` is what sub-job ``i`` runs.

    Each entry holds ``index``, the Snakemake ``jobid``, ``rule``, ``wildcards``, the
    absolute ``jobscript`` and its ``sha256`` (:mod:`.subjob` checks all of them).
    Written under a temporary name and renamed, so a sub-job never reads half of it.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps({"version": 1, "jobs": entries}, indent=1))
    tmp.replace(path)
    return path


class Journal:
    """Which PBS job produces which outputs, kept across runs (``journal.jsonl``).

    One JSON line per event: ``{"submit": id, "outputs": [...]}`` when a job is
    submitted, ``{"end": id}`` when this executor saw it end (or gave it up). Entries
    submitted but never ended belong to a run that was killed: :meth:`open_jobs`.
    Snakemake's own record of a job's id cannot serve here: the job's own Snakemake
    process overwrites it (with none) when it starts.
    """

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)

    def open_jobs(self) -> dict[tuple, str]:
        """Sorted outputs -> PBS id, for every job submitted and never ended."""
        opened: dict[str, tuple] = {}
        try:
            lines = self.path.read_text().splitlines()
        except OSError:
            return {}
        for line in lines:
            try:
                rec = json.loads(line)
            except ValueError:
                continue  # a line cut short by a kill
            if "submit" in rec:
                opened[rec["submit"]] = tuple(sorted(rec.get("outputs") or []))
            elif "end" in rec:
                opened.pop(rec["end"], None)
        return {outputs: jobid for jobid, outputs in opened.items()}

    def write(self, records: list[dict]) -> None:
        """Append `records` (one line each)."""
        if records:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with open(self.path, "a", encoding="utf-8") as fh:
                fh.write("".join(json.dumps(r) + "\n" for r in records))


def outputs_of(job: JobExecutorInterface) -> tuple:
    """Return the job's output paths, sorted (the key of :class:`Journal`)."""
    return tuple(sorted(str(f) for f in job.output))


class Executor(RemoteExecutor):
    """Submit Snakemake jobs to PBS Pro; watch them with one ``qstat`` per poll."""

    def __post_init__(self):
        s = self.workflow.executor_settings
        self.settings = s
        self.queue = os.environ.get("NCREEL_PBS_QUEUE") or s.queue
        try:
            self.account = pbs.project_account(s.account_env, no_account=s.no_account)
            self.account_problem = None
        except pbs.MissingAccount as err:
            self.account, self.account_problem = None, f"ncreel-pbs: error: {err}"
        self.array_rules = {r.strip() for r in (s.array_rules or "").split(",") if r.strip()}
        if s.job_overhead_mb is None or s.job_overhead_mb < 0:
            raise WorkflowError("pbs-pro-job-overhead-mb must be 0 or more (MB added to "
                                f"each job's mem request), got {s.job_overhead_mb}")
        if s.array_limit < 2:
            raise WorkflowError("pbs-pro-array-limit must be at least 2 (OpenPBS arrays "
                                "have 2 or more sub-jobs)")
        problem = pbs.log_dir_problem(s.log_dir)
        if problem:
            raise WorkflowError(f"ncreel-pbs: error: {problem}")
        self._runner = _runner
        # Before any job: a qsub or qstat that is missing or not PBS Pro's would leave
        # jobs that this executor can never see finish.
        problem = pbs.pbs_pro_problem(runner=self._runner, attempts=s.qstat_attempts)
        if problem:
            raise WorkflowError(f"ncreel-pbs: error: {problem}")
        # Jobs load the --config values from a file instead of a command line that
        # Snakemake quotes with repr() and /bin/sh re-parses (ncreel's workflow does this
        # at parse time; here for any other workflow).
        try:
            pass_config_by_file(self.workflow.config_settings)
        except NcreelError as err:
            raise WorkflowError(f"ncreel-pbs: error: {err}") from None
        self._failed_polls = 0
        self.journal = Journal(Path(pbs.STATE_DIR) / "journal.jsonl")
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
        return pbs.run_qsub(cmd, runner=self._runner)

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
        wrapper = pbs.write_wrapper(jobscript, pbs.STATE_DIR)
        props = json.loads(job.properties())
        try:
            cmd = pbs.build_qsub(props, str(wrapper), **self._qsub_kw())
            jobid = self._qsub(cmd)
        except (pbs.QsubError, ValueError) as err:
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
            cmd = pbs.build_qsub(props, str(script), array_size=len(jobs), log_tag=tag,
                                 **self._qsub_kw())
            array_id = self._qsub(cmd)
        except (pbs.QsubError, ValueError) as err:
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
        verdicts = pbs.statuses(list(recorded.values()), state_dir=pbs.STATE_DIR,
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
                verdicts = pbs.statuses(ids, state_dir=pbs.STATE_DIR,
                                        attempts=self.settings.qstat_attempts,
                                        runner=self._runner, log=self.logger.warning,
                                        strict=True)
                self._failed_polls = 0
            except pbs.QstatUnusable as err:
                raise WorkflowError(self._qstat_gave_up(err, ids)) from None
            except pbs.QstatError as err:
                self._failed_polls += 1
                if self._failed_polls >= self.settings.qstat_failed_polls:
                    raise WorkflowError(self._qstat_gave_up(
                        f"{err} ({self._failed_polls} polls in a row)", ids)) from None
                self.logger.warning(
                    f"qstat keeps failing ({err}); poll {self._failed_polls} of "
                    f"{self.settings.qstat_failed_polls} before the run stops; jobs without "
                    "a recorded exit status stay running")
                verdicts = pbs.marker_statuses(ids, pbs.STATE_DIR)
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
        ids = list(dict.fromkeys(pbs.array_parent(j.external_jobid) for j in active_jobs
                                 if j.external_jobid))
        self.journal.write([{"end": j.external_jobid} for j in active_jobs if j.external_jobid])
        for start in range(0, len(ids), 100):
            try:
                subprocess.run(["qdel", *ids[start:start + 100]],
                               capture_output=True, text=True, timeout=60)
            except (subprocess.TimeoutExpired, OSError) as err:
                self.logger.warning(f"qdel failed: {err}")
