"""PBS Pro on the login node, for ncreel; and the legacy cluster-generic submit/status helper.

All ``qsub``/``qstat`` logic lives in the PBS Pro executor plugin
(``snakemake_executor_plugin_pbs_pro``, its own distribution under
``workflow/executor-plugin-pbs-pro/``). ncreel uses it for what it needs on a login node
before and after a run: the project account and the queue (checked once before the first
submission, ``workflow/rules/scheduler.smk``) and deleting the jobs of a killed run
(:func:`cancel_orphan_pbs_jobs`).

Isolated here, for sites that run Snakemake's cluster-generic executor instead of the
plugin (no profile of ncreel does): ``workflow/scripts/ncreel_pbs.py`` runs :func:`main`:

``submit [options] JOBSCRIPT``
    Reads the job's declared threads, ``mem_mb`` and ``runtime`` from the
    ``# properties = {...}`` line Snakemake writes into every jobscript, builds the
    plugin's ``qsub`` argument list and prints the job id.

``status JOBID``
    Prints exactly one of ``running``, ``success``, ``failed``: PBS Pro's ``qstat -x -f
    -F json``; where that is not available (Torque, Slurm's Torque wrappers), ``qstat -f``,
    then the exit status the job's wrapper recorded, then ``sacct`` where present.
    Transient ``qstat`` errors are retried. ``ncreel status`` asks it about single jobs.

Standard library only (with the plugin's standard-library modules), so any ``python3``
can run it.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

from snakemake_executor_plugin_pbs_pro.cancel import (  # noqa: F401  (ncreel's API)
    QUEUE_ENV,
    cancel_orphan_pbs_jobs,
    pbs_peer_servers,
)
from snakemake_executor_plugin_pbs_pro.checks import (  # noqa: F401  (ncreel's API)
    ACCOUNT_ENV,
    MissingAccount,
    _missing_account,
    log_dir_problem,
    project_account,
    queue_problem,
)
from snakemake_executor_plugin_pbs_pro.job_status_query import (
    PBS_PRO_PATH_HINT,
    UNKNOWN_JOB_RC,
    QstatError,
    QstatUnusable,
    _exit_status,
    _lookup,
    _unsupported,
    classify,
    describe_exit,
    parse_torque,
)
from snakemake_executor_plugin_pbs_pro.state import STATE_DIR, read_marker
from snakemake_executor_plugin_pbs_pro.submit_string import (
    QsubError,
    build_qsub,
    job_env_names,
    qsub_environment,
    run_qsub,
    write_wrapper,
)


def find_qstat() -> str | None:
    """Path of PBS Pro's ``qstat`` (``/opt/pbs/bin`` first, then ``PATH``); None if absent."""
    return shutil.which("qstat", path="/opt/pbs/bin:" + os.environ.get("PATH", ""))


def _run(cmd: list[str], timeout: float = 60) -> subprocess.CompletedProcess:
    # Without the secrets a job's Variable_List would show to every user
    # (submit_string.SECRET_ENV).
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                          env=qsub_environment())


def parse_pbs_json(text: str) -> dict[str, dict]:
    """Parse PBS Pro ``qstat -f -F json`` output into ``{job id: attributes}``.

    The document is ``{"timestamp": ..., "pbs_version": ..., "pbs_server": ...,
    "Jobs": {"<id>": {"job_state": "F", "Exit_status": 0, ...}}}``; ``Jobs`` is absent
    when no job matched.
    """
    doc = json.loads(text)
    if not isinstance(doc, dict):
        raise ValueError("qstat JSON output is not an object")
    jobs = doc.get("Jobs") or {}
    if not isinstance(jobs, dict):
        raise ValueError("qstat JSON 'Jobs' is not an object")
    return jobs


def query(jobid: str, *, qstat: str = "qstat", attempts: int = 4, delay: float = 2.0,
          runner=_run) -> tuple[str, dict | None]:
    """Ask ``qstat`` about `jobid`; return ``(format, record or None if unknown)``.

    Tries PBS Pro's ``qstat -x -f -F json`` first and falls back to Torque-style
    ``qstat -f`` when the options are rejected. Other failures (server busy, timeout,
    connection refused) are retried `attempts` times with growing delays before
    :class:`QstatError` is raised.
    """
    formats = [("json", [qstat, "-x", "-f", "-F", "json", jobid]),
               ("torque", [qstat, "-f", jobid])]
    last = ""
    for attempt in range(attempts):
        if attempt:
            time.sleep(delay * attempt)
        for fmt, cmd in formats:
            try:
                proc = runner(cmd)
            except FileNotFoundError:
                raise QstatUnusable(f"{qstat} not found on PATH: {PBS_PRO_PATH_HINT}") from None
            except (subprocess.TimeoutExpired, OSError) as err:
                last = f"{' '.join(cmd)}: {err}"
                break
            if fmt == "json" and _unsupported(proc):
                continue  # not PBS Pro: try Torque-style output
            if proc.returncode == UNKNOWN_JOB_RC or "unknown job id" in proc.stderr.lower():
                return fmt, None
            if proc.returncode != 0:
                last = f"{' '.join(cmd)}: exit {proc.returncode}: {proc.stderr.strip()[:300]}"
                break
            try:
                jobs = parse_pbs_json(proc.stdout) if fmt == "json" else parse_torque(proc.stdout)
            except ValueError as err:
                last = f"{' '.join(cmd)}: unparsable output: {err}"
                break
            if not jobs and not proc.stdout.strip():
                return fmt, None  # Slurm's wrapper: nothing printed for a purged job
            return fmt, _lookup(jobs, jobid)
    raise QstatError(last or "qstat failed")


def sacct_status(jobid: str, runner=_run) -> str | None:
    """``success``/``failed``/``running`` from Slurm accounting, or None if unavailable."""
    if shutil.which("sacct") is None:
        return None
    try:
        proc = runner(["sacct", "-j", jobid.split(".")[0], "-X", "-n", "-P",
                       "-o", "State,ExitCode"], timeout=30)
    except (subprocess.TimeoutExpired, OSError):
        return None
    if proc.returncode != 0 or not proc.stdout.strip():
        return None
    state, _, code = proc.stdout.strip().splitlines()[0].partition("|")
    state = state.split()[0] if state.strip() else ""
    if state in ("PENDING", "RUNNING", "REQUEUED", "RESIZING", "SUSPENDED", "COMPLETING"):
        return "running"
    if state == "COMPLETED" and code.strip() == "0:0":
        return "success"
    return "failed" if state else None


def _verdict(jobid: str, rec: dict | None, *, state_dir, runner, log, waits=(0, 2)) -> str:
    """Decide one job from its ``qstat`` record (Torque-style records too).

    Without a record, or without an exit status in it (Slurm's Torque wrapper): from the
    exit status its wrapper recorded, then Slurm's accounting (for a bare Slurm job id
    only); else ``failed``.
    """
    if rec is not None:
        verdict = classify(rec)
        if verdict is not None:
            if verdict == "failed":
                code = _exit_status(rec)
                log(f"job {jobid} failed: {describe_exit(code)}; {rec.get('comment', '')}")
            return verdict
    for wait in waits:
        time.sleep(wait)
        marker = read_marker(jobid, state_dir)
        if marker is not None:
            return "success" if marker == 0 else "failed"
    # Slurm's Torque wrappers print bare ids (``15``); a PBS id names its server (``15.vm``)
    # and Slurm's accounting knows nothing of it: where both run, its job 15 is another job.
    if jobid.isdigit():
        accounted = sacct_status(jobid, runner=runner)
        if accounted in ("success", "failed"):
            return accounted
    log(f"job {jobid} ended without recording an exit status (killed for memory or "
        "walltime, or cancelled): failed")
    return "failed"


def _log_stderr(msg: str) -> None:
    print(f"ncreel-pbs: {msg}", file=sys.stderr)


def status(jobid: str, *, state_dir: str | os.PathLike = STATE_DIR, qstat: str = "qstat",
           attempts: int = 4, delay: float = 2.0, runner=_run, log=None) -> str:
    """Return ``running``, ``success`` or ``failed`` for `jobid` (see the module docstring).

    Raises
    ------
    QstatUnusable
        When ``qstat`` is not on PATH (other ``qstat`` failures leave the job running).
    """
    log = log or _log_stderr
    try:
        fmt, rec = query(jobid, qstat=qstat, attempts=attempts, delay=delay, runner=runner)
    except QstatUnusable:
        raise
    except QstatError as err:
        marker = read_marker(jobid, state_dir)
        if marker is not None:
            return "success" if marker == 0 else "failed"
        log(f"qstat keeps failing for job {jobid} ({err}); reporting it as running")
        return "running"
    return _verdict(jobid, rec, state_dir=state_dir, runner=runner, log=log)


def read_properties(jobscript: str | os.PathLike) -> dict:
    """Return the ``# properties = {...}`` JSON Snakemake writes into each jobscript."""
    with open(jobscript, encoding="utf-8") as fh:
        for line in fh:
            if line.startswith("# properties = "):
                return json.loads(line[len("# properties = "):])
    raise ValueError(f"{jobscript}: no '# properties' line (not a Snakemake jobscript?)")


class SubmitError(RuntimeError):
    """A job cannot be submitted (no project account, no ``qsub``, ``qsub`` refused it)."""


def submit(jobscript: str, *, queue: str | None, account: str | None, log_dir: str,
           state_dir: str = STATE_DIR, require_account: bool = True, runner=_run,
           account_env: str = ACCOUNT_ENV, env: tuple = (), **kw) -> str:
    """Submit `jobscript` with ``qsub``; return the job id ``qsub`` printed.

    The job gets the plugin's list of variables (``submit_string.JOB_ENV``) and those
    `env` names (``NAME*``: a prefix), by ``qsub -v``; a named one whose value ``qsub -v``
    cannot carry is said on standard error.

    Raises
    ------
    SubmitError
        No account (:class:`MissingAccount`, when `require_account`), no ``qsub`` on PATH,
        or ``qsub`` refused the job; the message is one line for the user.
    """
    if require_account and not account:
        raise _missing_account(account_env)
    if runner is _run and shutil.which("qsub") is None:
        raise SubmitError("qsub not found on PATH: run snakemake on a PBS login node (or "
                          "load the PBS module) to use this profile")
    props = read_properties(jobscript)
    Path(log_dir).mkdir(parents=True, exist_ok=True)
    wrapper = write_wrapper(jobscript, state_dir)
    names, unsafe = job_env_names(env)
    if unsafe:
        print(f"ncreel-pbs: not passed to the job: {', '.join(unsafe)} (a quote or a "
              "backslash in the value, which qsub -v cannot carry)", file=sys.stderr)
    cmd = build_qsub(props, str(wrapper), queue=queue, account=account, log_dir=log_dir,
                     env=names, **kw)
    try:
        return run_qsub(cmd, runner=runner)
    except QsubError as err:
        raise SubmitError(str(err)) from None


#: The queue variable ncreel read before the executor plugin took its own name.
OLD_QUEUE_ENV = "NCREEL_PBS_QUEUE"


def old_queue_env_problem(env=None) -> str | None:
    """One line when ``$NCREEL_PBS_QUEUE`` is set: it no longer chooses the queue.

    Jobs would otherwise go to the profile's queue without a word.
    """
    env = os.environ if env is None else env
    if env.get(OLD_QUEUE_ENV):
        return (f"{OLD_QUEUE_ENV} is no longer read: set {QUEUE_ENV}={env[OLD_QUEUE_ENV]} "
                f"instead (and unset {OLD_QUEUE_ENV}), then run the same command again")
    return None


def profile_queue(submit_cmd: str, env=None) -> str | None:
    """Return the queue a PBS profile's submit command sends jobs to.

    ``$SNAKEMAKE_PBS_PRO_QUEUE`` when set (the variable of the ``pbs-pro`` executor's
    queue setting, so one name serves both), else the ``--queue`` option of `submit_cmd` (the
    profile's ``cluster-generic-submit-cmd``); None when neither names one. A queue may
    name another server: ``queue@server``.
    """
    env = os.environ if env is None else env
    if env.get(QUEUE_ENV):
        return env[QUEUE_ENV]
    args = shlex.split(submit_cmd or "")
    for i, arg in enumerate(args):
        if arg == "--queue" and i + 1 < len(args):
            return args[i + 1]
        if arg.startswith("--queue="):
            return arg.split("=", 1)[1]
    return None


def main(argv: list[str] | None = None) -> int:
    """Command-line entry: ``submit`` and ``status`` (see the module docstring)."""
    ap = argparse.ArgumentParser(prog="ncreel-pbs", description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    sp = sub.add_parser("submit", help="qsub a Snakemake jobscript; print the job id")
    sp.add_argument("jobscript")
    sp.add_argument("--queue", default=None,
                    help=f"queue (overridden by ${QUEUE_ENV} when set)")
    sp.add_argument("--account-env", default=ACCOUNT_ENV,
                    help="environment variable holding the project account")
    sp.add_argument("--no-account", action="store_true",
                    help="submit without -A (sites that need no account)")
    sp.add_argument("--log-dir", default="logs/pbs")
    sp.add_argument("--state-dir", default=STATE_DIR)
    sp.add_argument("--max-walltime", default=None, help="queue limit HH:MM:SS")
    sp.add_argument("--node-cores", type=int, default=None,
                    help="ask for whole nodes of this many cores (exclusive queues)")
    sp.add_argument("--node-mem-gb", type=int, default=None)
    sp.add_argument("--extra-l", action="append", default=[],
                    help="extra -l resource, e.g. job_priority=economy")
    sp.add_argument("--env", action="append", default=[],
                    help="comma-separated environment variables the job gets too (NAME* "
                         "for a prefix), beside PATH, the locale, PYTHON*, SNAKEMAKE_*...")
    st = sub.add_parser("status", help="print running/success/failed for a job id")
    st.add_argument("jobid")
    st.add_argument("--state-dir", default=STATE_DIR)
    st.add_argument("--attempts", type=int, default=4)
    args = ap.parse_args(argv)
    if args.cmd == "submit":
        queue = os.environ.get(QUEUE_ENV) or args.queue
        try:
            account = project_account(args.account_env, no_account=args.no_account)
            jobid = submit(args.jobscript, queue=queue, account=account, log_dir=args.log_dir,
                           state_dir=args.state_dir, require_account=not args.no_account,
                           account_env=args.account_env, max_walltime=args.max_walltime,
                           node_cores=args.node_cores, node_mem_gb=args.node_mem_gb,
                           extra_l=args.extra_l,
                           env=tuple(n for e in args.env for n in e.split(",") if n))
        except (SubmitError, MissingAccount) as err:
            print(f"ncreel-pbs: error: {err}", file=sys.stderr)
            return 1
        print(jobid)
        return 0
    try:
        print(status(args.jobid, state_dir=args.state_dir, attempts=args.attempts))
    except QstatUnusable as err:
        # A non-zero exit makes Snakemake's cluster-generic executor stop the run.
        print(f"ncreel-pbs: error: {err}", file=sys.stderr)
        return 2
    return 0
