"""One run's PBS jobs, without Snakemake around them: the executor's state and decisions.

:class:`PbsRun` checks the settings, replays the :class:`~.journal.Journal`, decides which
jobs go out together as arrays, which jobs of a killed run to take over, what one poll
says about the active jobs (and when to give up on a failing ``qstat``), and deletes jobs;
every PBS command goes through its `runner`. The executor makes one in its
``__post_init__``; tests make their own. Standard library only.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable, Hashable, Iterable
from pathlib import Path

from snakemake_executor_plugin_pbs_pro import checks, job_status_query, submit_string
from snakemake_executor_plugin_pbs_pro.cancel import cancel_jobs
from snakemake_executor_plugin_pbs_pro.journal import Journal, outputs_of
from snakemake_executor_plugin_pbs_pro.state import STATE_DIR, legacy_dirs, marker_statuses

#: Prefix of every line the executor says to the user.
SAYS = "pbs-pro: error:"


class SettingsError(ValueError):
    """A setting cannot work, or the PBS commands on PATH cannot serve (one line)."""


class RunStopped(RuntimeError):
    """The run cannot follow its jobs any more (one line naming them and what to do)."""


def _runner(cmd: list[str], timeout: float = 60) -> subprocess.CompletedProcess:
    # Without the secrets a job's Variable_List would show to every user
    # (submit_string.SECRET_ENV).
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                          env=submit_string.qsub_environment())


class PbsRun:
    """The PBS side of one Snakemake run in the working directory.

    Parameters
    ----------
    settings : ExecutorSettings
        The executor's settings (any object with the same attributes).
    runner : callable
        ``runner(argv, timeout=...) -> subprocess.CompletedProcess``: every ``qsub``,
        ``qstat`` and ``qdel`` (no shell).
    state_dir : path
        Where the journal, the recorded exit statuses and array manifests are.
    environ : mapping, optional
        Environment (the account variable); default ``os.environ``. The queue is the
        setting's, which ``$SNAKEMAKE_PBS_PRO_QUEUE`` sets (Snakemake reads it).
    log : callable, optional
        Told of failed jobs and ``qstat`` trouble (one line each).
    check_commands : bool
        Ask ``qstat --version`` now whether PBS Pro's commands are on PATH.
    envvars : iterable of str
        Names of variables Snakemake passes to remote jobs (``--envvars``, a Snakefile's
        ``envvars:``): every job gets them, beside the executor's list
        (:data:`.submit_string.JOB_ENV`) and the ``env`` setting.

    Raises
    ------
    SettingsError
        A setting that cannot work (negative overhead, arrays of fewer than 2, a log
        directory leading out of the working directory) or, with `check_commands`,
        ``qsub``/``qstat`` missing or not PBS Pro's.
    """

    def __init__(self, settings, *, runner: Callable = _runner,
                 state_dir: str | os.PathLike = STATE_DIR, environ=None,
                 log: Callable[[str], None] | None = None, check_commands: bool = True,
                 envvars: Iterable[str] = ()):
        env = os.environ if environ is None else environ
        self.settings, self.runner, self.state_dir = settings, runner, Path(state_dir)
        self.log = log or (lambda msg: None)
        self.queue = settings.queue
        named = [n for n in (getattr(settings, "env", None) or "").split(",") if n.strip()]
        #: What every job gets from the submitting environment (qsub -v), by name.
        self.env, unsafe = submit_string.job_env_names([*named, *envvars], env)
        if unsafe:
            self.log(f"pbs-pro: not passed to PBS jobs: {', '.join(unsafe)} (a quote or a "
                     "backslash in the value, which qsub -v cannot carry)")
        try:
            self.account = checks.project_account(settings.account_env,
                                                  no_account=settings.no_account,
                                                  environ=env)
            self.account_problem = None
        except checks.MissingAccount as err:
            self.account, self.account_problem = None, f"{SAYS} {err}"
        self.array_rules = {r.strip() for r in (settings.array_rules or "").split(",")
                            if r.strip()}
        if settings.job_overhead_mb is None or settings.job_overhead_mb < 0:
            raise SettingsError("pbs-pro-job-overhead-mb must be 0 or more (MB added to "
                                f"each job's mem request), got {settings.job_overhead_mb}")
        if settings.array_limit < 2:
            raise SettingsError("pbs-pro-array-limit must be at least 2 (OpenPBS arrays "
                                "have 2 or more sub-jobs)")
        problem = checks.log_dir_problem(settings.log_dir)
        if problem:
            raise SettingsError(f"{SAYS} {problem}")
        if check_commands:
            # A qsub or qstat that is missing or not PBS Pro's would leave jobs that this
            # executor can never see finish.
            problem = job_status_query.pbs_pro_problem(runner=runner,
                                                       attempts=settings.qstat_attempts)
            if problem:
                raise SettingsError(f"{SAYS} {problem}")
        self.failed_polls = 0
        #: PBS id -> how it was deleted, for the jobs the last polls saw deleted.
        self.deleted: dict[str, str] = {}
        #: Sorted outputs -> (PBS id, how it was deleted): jobs not to resubmit.
        self.deleted_outputs: dict[tuple, tuple[str, str]] = {}
        self.journal = Journal(self.state_dir / "journal.jsonl",
                               [d / "journal.jsonl" for d in legacy_dirs(self.state_dir)])
        #: Sorted outputs -> PBS id of every job a killed run submitted and never saw end.
        self.killed_runs_jobs = self.journal.open_jobs()

    def is_array_rule(self, rule) -> bool:
        """Whether jobs of `rule` go out as job arrays (``--pbs-pro-array-rules``).

        A rule is named there by its name, or by its name in the module that defines it:
        a workflow used as a module with a rule prefix (``use rule * from other as
        other_*``) has its rules renamed, and the profile it ships names them as it wrote
        them (``process_shard`` for ``other_process_shard``). Snakemake keeps each
        module's rules under the written names in the module's ``rules`` namespace.
        """
        if rule.name in self.array_rules:
            return True
        namespace = (getattr(rule, "module_globals", None) or {}).get("rules")
        written = getattr(namespace, "_rules", None) or {}
        return any(getattr(proxy, "rule", None) is rule for name, proxy in written.items()
                   if name in self.array_rules)

    # ----------------------------------------------------------------- submission

    def qsub_kw(self) -> dict:
        """Keyword arguments of :func:`.submit_string.build_qsub` from the settings."""
        s = self.settings
        return dict(queue=self.queue, account=self.account, log_dir=s.log_dir,
                    max_walltime=s.max_walltime, node_cores=s.node_cores,
                    node_mem_gb=s.node_mem_gb, job_overhead_mb=s.job_overhead_mb,
                    extra_l=[x for x in (s.extra_l or "").split(",") if x], env=self.env)

    def qsub(self, cmd: list[str], outputs_by_id: dict[str, Iterable[str]] | None = None
             ) -> str:
        """Run the ``qsub`` argument list `cmd`; return the job id; journal its jobs.

        `outputs_by_id` maps ``"[]"``-relative ids to outputs: ``{"": outputs}`` for a
        plain job, ``{"[0]": ..., "[1]": ...}`` for an array's sub-jobs.

        Raises
        ------
        QsubError
            ``qsub`` refused the job (its message says why).
        """
        Path(self.settings.log_dir).mkdir(parents=True, exist_ok=True)
        jobid = submit_string.run_qsub(cmd, runner=self.runner)
        records = []
        for sub, outputs in (outputs_by_id or {}).items():
            sub_id = jobid.replace("[]", sub, 1) if sub else jobid
            records.append({"submit": sub_id, "outputs": sorted(map(str, outputs))})
        self.journal.write(records)
        return jobid

    def batches(self, jobs: Iterable, array_key: Callable[[object], Hashable | None]
                ) -> list[list]:
        """Split ready `jobs` into submissions: one job each, or arrays of equal keys.

        `array_key(job)` is None for a job that goes out alone (not of an array rule, or
        a group job), else its :func:`.arrays.batch_key`. Jobs of one key are cut into
        chunks of at most ``array-limit``; a chunk of one is submitted as a plain job.
        Plain jobs come first, in the order given.
        """
        plain, grouped = [], {}
        for job in jobs:
            key = array_key(job)
            if key is None:
                plain.append([job])
            else:
                grouped.setdefault(key, []).append(job)
        limit = self.settings.array_limit
        return plain + [batch[i:i + limit] for batch in grouped.values()
                        for i in range(0, len(batch), limit)]

    # ----------------------------------------------------------------- re-attach

    def take_over(self, jobs: list, exists: Callable[[str], bool] = os.path.exists
                  ) -> tuple[dict, list]:
        """Split `jobs` into those a killed run's PBS jobs still produce, and the rest.

        A job the journal shows submitted by a run that never saw it end is asked about
        (one ``qstat`` for all): while PBS still runs it, or when it ended with
        ``Exit_status`` 0 and its outputs exist, it is taken over instead of being
        submitted a second time; otherwise the old entry is closed in the journal.

        Returns
        -------
        (dict, list)
            Job -> PBS id of the jobs taken over; the jobs that still need submitting.
        """
        recorded = {job: self.killed_runs_jobs[outputs_of(job)] for job in jobs
                    if outputs_of(job) in self.killed_runs_jobs}
        if not recorded:
            return {}, list(jobs)
        verdicts = job_status_query.statuses(
            list(recorded.values()), state_dir=self.state_dir,
            attempts=self.settings.qstat_attempts, runner=self.runner, log=self.log)
        taken, rest, given_up = {}, [], []
        for job in jobs:
            jobid = recorded.get(job)
            verdict = verdicts.get(jobid)
            if verdict == "running" or (
                    verdict == "success" and all(exists(f) for f in outputs_of(job))):
                taken[job] = jobid
            else:
                rest.append(job)
                if jobid is not None:
                    given_up.append({"end": jobid})
            self.killed_runs_jobs.pop(outputs_of(job), None)
        self.journal.write(given_up)
        return taken, rest

    # ----------------------------------------------------------------- status

    def poll(self, jobids: list[str]) -> dict[str, str]:
        """``running``/``success``/``failed``/``deleted`` of every id, from ONE ``qstat``.

        A job deleted with ``qdel`` is ``deleted`` (:attr:`deleted` says by whom), unless
        ``retry-deleted`` is set: then it is ``failed``, as any other failure.

        A ``qstat`` that keeps failing within a poll leaves the jobs without a recorded
        exit status running; after ``qstat-failed-polls`` such polls in a row the run
        stops. Jobs seen ending are closed in the journal.

        Raises
        ------
        RunStopped
            At once when ``qstat`` cannot serve at all (missing, not PBS Pro's); after
            too many failed polls in a row.
        """
        s = self.settings
        try:
            verdicts = job_status_query.statuses(
                jobids, state_dir=self.state_dir, attempts=s.qstat_attempts,
                runner=self.runner, log=self.log, strict=True,
                deleted=None if getattr(s, "retry_deleted", False) else self.deleted)
            self.failed_polls = 0
        except job_status_query.QstatUnusable as err:
            raise RunStopped(self.gave_up(err, jobids)) from None
        except job_status_query.QstatError as err:
            self.failed_polls += 1
            if self.failed_polls >= s.qstat_failed_polls:
                raise RunStopped(self.gave_up(
                    f"{err} ({self.failed_polls} polls in a row)", jobids)) from None
            self.log(f"qstat keeps failing ({err}); poll {self.failed_polls} of "
                     f"{s.qstat_failed_polls} before the run stops; jobs without a "
                     "recorded exit status stay running")
            verdicts = marker_statuses(jobids, self.state_dir)
        self.journal.write([{"end": j} for j in jobids if verdicts[j] != "running"])
        return verdicts

    def gave_up(self, err, jobids: list[str]) -> str:
        """Return the one line that stops the run when ``qstat`` cannot tell how jobs end."""
        shown = ", ".join(jobids[:5]) + (f" and {len(jobids) - 5} more"
                                        if len(jobids) > 5 else "")
        return (f"{SAYS} cannot follow the run's PBS jobs: {err}. Its jobs ({shown}) are "
                "left to PBS: run the same command again once `qstat -x -f -t <id>` works "
                "(it takes them over), or delete them with qdel.")

    # ----------------------------------------------------------------- deleted jobs

    def deleted_message(self, jobid: str, job_text: str, outputs: tuple) -> str:
        """Remember that `jobid` (making `outputs`) was deleted; return the line saying so.

        `job_text` names the Snakemake job (``rule X, job N``). The job's next attempt is
        then refused by :meth:`refusal`.
        """
        reason = self.deleted.pop(jobid, "deleted with qdel")
        self.deleted_outputs[tuple(outputs)] = (jobid, reason)
        return (f"{SAYS.split()[0]} PBS job {jobid} ({job_text}) was {reason}; it is not "
                "resubmitted.")

    def refusal(self, outputs: tuple, job_text: str) -> str | None:
        """Return the line refusing a job whose previous attempt was deleted, or None.

        Snakemake asks for a job's next attempt (its ``retries``) whatever ended the
        previous one; a job someone deleted with ``qdel`` was meant to stop.
        """
        found = self.deleted_outputs.get(tuple(outputs))
        if found is None:
            return None
        jobid, reason = found
        return (f"{SAYS} not resubmitting {job_text}: its PBS job {jobid} was {reason}. Run "
                "the same command again to submit it anew (pbs-pro-retry-deleted: true "
                "resubmits deleted jobs).")

    # ----------------------------------------------------------------- cancel

    def cancel(self, jobids: list[str]) -> list[list[str]]:
        """Close `jobids` in the journal and ``qdel`` them (arrays once); the calls run."""
        jobids = [j for j in jobids if j]
        self.journal.write([{"end": j} for j in jobids])
        return cancel_jobs(jobids, runner=self.runner, log=self.log)
