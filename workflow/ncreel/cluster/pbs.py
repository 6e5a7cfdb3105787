"""Submit Snakemake jobs to PBS Pro (or Torque) and report their status.

Used by the ``cheyenne``, ``derecho`` and ``casper`` profiles through Snakemake's
cluster-generic executor (``workflow/scripts/ncreel_pbs.py`` runs :func:`main`):

``submit [options] JOBSCRIPT``
    Reads the job's declared threads, ``mem_mb`` and ``runtime`` from the
    ``# properties = {...}`` line Snakemake writes into every jobscript, so no value
    from config, wildcards or rule names passes through a shell: the profile's submit
    command holds only fixed options. Calls ``qsub`` with an argument list and prints
    the job id. The job runs a small wrapper that records the jobscript's exit status
    in ``.snakemake/ncreel-pbs/<jobid>.exit``.

``status JOBID``
    Prints exactly one of ``running``, ``success``, ``failed``. PBS Pro only lists
    finished jobs with ``qstat -x``; ``qstat -x -f -F json`` gives ``job_state`` and
    ``Exit_status``. Where that is not available (Torque, Slurm's Torque wrappers),
    ``qstat -f`` is read instead; it has no exit status on Slurm's wrapper (finished
    jobs are ``C`` whether they failed or not), so the exit-status file decides, then
    ``sacct`` where present. A job that ended without writing that file (killed for
    memory or walltime) is ``failed``. Transient ``qstat`` errors are retried.

Only the standard library is used, so any ``python3`` can run it.

Exit-status conventions (PBS Pro, from OpenPBS ``src/include/job.h`` and the PBS
Professional reference guide): ``0`` success; ``1..255`` the job script's own exit
status; ``> 256`` killed by signal ``status - 256`` (e.g. ``271`` = SIGTERM at the
walltime limit on older servers); negative values are ``JOB_EXEC_*`` codes, e.g.
``-27`` JOB_EXEC_KILL_MEM, ``-29`` JOB_EXEC_KILL_WALLTIME, ``-11`` JOB_EXEC_RERUN.
Everything other than ``0`` is a failure.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

from ncreel.cluster.commands import stdout_of

#: Where job wrappers record exit statuses (relative to the Snakemake working directory).
STATE_DIR = ".snakemake/ncreel-pbs"
#: Environment variable holding the project account (``qsub -A``) unless a profile names another.
ACCOUNT_ENV = "PBS_ACCOUNT"

#: PBS Pro / Torque job states that mean "not finished yet".
#: Q queued, R running, H held, W waiting, T transit, B array begun, E exiting (still
#: cleaning up: Exit_status may not be final), S/U suspended, M moved.
ACTIVE_STATES = frozenset("QRHWTBESUM")
#: F finished (PBS Pro, with -x), X finished subjob, C completed (Torque, Slurm wrapper).
DONE_STATES = frozenset("FXC")

#: ``qstat`` exit status for "Unknown Job Id" (PBS Pro and Torque; Slurm's wrapper too).
UNKNOWN_JOB_RC = 153

JOB_EXEC_CODES = {
    -1: "JOB_EXEC_FAIL1 (exec failed before files)",
    -2: "JOB_EXEC_FAIL2 (exec failed after files)",
    -3: "JOB_EXEC_RETRY",
    -4: "JOB_EXEC_INITABT",
    -10: "JOB_EXEC_FAILUID",
    -11: "JOB_EXEC_RERUN",
    -24: "JOB_EXEC_KILL_NCPUS_BURST",
    -25: "JOB_EXEC_KILL_NCPUS_SUM",
    -26: "JOB_EXEC_KILL_VMEM (exceeded vmem)",
    -27: "JOB_EXEC_KILL_MEM (exceeded mem)",
    -28: "JOB_EXEC_KILL_CPUT (exceeded cput)",
    -29: "JOB_EXEC_KILL_WALLTIME (exceeded walltime)",
}


class QstatError(RuntimeError):
    """``qstat`` failed in a way that may be transient."""


class QstatUnusable(QstatError):
    """The ``qstat`` on PATH cannot answer PBS Pro's questions; asking again cannot help.

    It is missing, rejects PBS Pro's options (Torque's ``qstat``, Slurm's Torque wrapper)
    or prints something other than PBS Pro's ``qstat -f`` records.
    """


#: What to do when the PBS commands on PATH are not PBS Pro's.
PBS_PRO_PATH_HINT = ("put PBS Pro's commands first on PATH (on NCAR login nodes they are "
                     "there by default; a local OpenPBS: export PATH=/opt/pbs/bin:$PATH), "
                     "then run the same command again")


# ----------------------------------------------------------------------------- parsing


def parse_torque(text: str) -> dict[str, dict[str, str]]:
    """Parse Torque-style ``qstat -f`` output into ``{job id: {key: value}}``.

    Handles PBS Pro's 4-space indentation, Torque's tab indentation and continuation
    lines (long values wrapped onto lines indented deeper or by a tab).
    """
    jobs: dict[str, dict[str, str]] = {}
    current: dict[str, str] | None = None
    last_key = None
    for raw in text.splitlines():
        line = raw.rstrip("\n")
        m = re.match(r"^Job Id:\s*(\S+)", line)
        if m:
            current = jobs.setdefault(m.group(1), {})
            last_key = None
            continue
        if current is None or not line.strip():
            continue
        m = re.match(r"^\s+([A-Za-z_][\w.]*) = ?(.*)$", line)
        if m:
            last_key = m.group(1)
            current[last_key] = m.group(2).strip()
        elif last_key is not None:  # continuation of a wrapped value
            current[last_key] += line.strip()
    return jobs


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


def same_job(a: str, b: str) -> bool:
    """Whether PBS job ids `a` and `b` name the same job.

    A PBS job id is ``<sequence number>.<server>`` (``4127005.desched1``,
    ``812.casper-pbs``); the server part may be missing (``4127005``) or fully qualified
    (``4127005.desched1.hpc.ucar.edu``). Ids match when the sequence numbers are equal and
    the servers are the same, one is missing, or one is the other's leading labels. Jobs
    of different servers (NCAR's Casper and Derecho are separate PBS servers) never match.
    """
    seq_a, _, srv_a = a.partition(".")
    seq_b, _, srv_b = b.partition(".")
    if seq_a != seq_b:
        return False
    if not srv_a or not srv_b or srv_a == srv_b:
        return True
    short, full = sorted((srv_a, srv_b), key=len)
    return full.startswith(short + ".")


def _lookup(jobs: dict, jobid: str):
    """Return the record of `jobid` in `jobs` (see :func:`same_job`), or None."""
    if jobid in jobs:
        return jobs[jobid]
    for key, rec in jobs.items():
        if same_job(key, jobid):
            return rec
    return None


def _exit_status(rec: dict) -> int | None:
    for key in ("Exit_status", "exit_status"):
        if key in rec and str(rec[key]).strip() != "":
            try:
                return int(str(rec[key]).strip())
            except ValueError:
                return None
    return None


def classify(rec: dict) -> str | None:
    """Return ``running``, ``success``, ``failed``, or None when the record cannot tell.

    None means "finished, but the record has no exit status" (Slurm's Torque wrapper),
    so another source must decide.
    """
    state = str(rec.get("job_state", "")).strip()[:1].upper()
    if state in ACTIVE_STATES:
        return "running"
    if state in DONE_STATES:
        status = _exit_status(rec)
        if status is None:
            return None
        return "success" if status == 0 else "failed"
    return None


def describe_exit(status: int) -> str:
    """Human-readable meaning of a PBS exit status (for logs)."""
    if status in JOB_EXEC_CODES:
        return JOB_EXEC_CODES[status]
    if status > 256:
        return f"killed by signal {status - 256}"
    if status > 128:
        return f"exited {status} (shell: signal {status - 128})"
    return f"exit status {status}"


# ----------------------------------------------------------------------------- qstat


def _run(cmd: list[str], timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)


def _unsupported(proc: subprocess.CompletedProcess) -> bool:
    """Whether a failed ``qstat`` rejected its options (it is not PBS Pro's)."""
    # stdout only when it holds no job records (whose values may say anything).
    out = "" if "Job Id:" in (proc.stdout or "") else proc.stdout or ""
    err = f"{proc.stderr or ''}\n{out}".lower()
    return proc.returncode != 0 and any(
        s in err for s in ("unknown option", "invalid option", "illegal option", "usage"))


def _first_line(text: str) -> str:
    return next((ln.strip() for ln in (text or "").splitlines() if ln.strip()), "")[:200]


def _located(cmd: str) -> str:
    """`cmd` with the directory PATH finds it in (what a user must look at)."""
    return shutil.which(cmd) or cmd


def pbs_pro_problem(qsub: str = "qsub", qstat: str = "qstat", runner=_run,
                    attempts: int = 4, delay: float = 2.0, sleep=time.sleep) -> str | None:
    """One line saying why the PBS commands on PATH cannot serve PBS Pro, or None.

    Checks that `qsub` and `qstat` are found and that ``qstat --version`` answers
    ``pbs_version = ...`` as PBS Pro's does (Torque's ``qstat`` and Slurm's Torque wrapper
    do not; they also reject ``qstat -x``, which the executor needs to see finished jobs).
    A ``qstat`` that fails without rejecting the option (a busy or unreachable server, a
    timeout) is asked again, `attempts` times with growing pauses (`delay` x attempt
    seconds), as the executor retries it during a run; when it keeps failing the line
    says so, not that it is not PBS Pro's.
    """
    for cmd in (qsub, qstat):
        if shutil.which(cmd) is None:
            return f"{cmd} not found on PATH: {PBS_PRO_PATH_HINT}"
    said = ""
    for attempt in range(max(1, attempts)):
        if attempt:
            sleep(delay * attempt)
        try:
            proc = runner([qstat, "--version"], timeout=60)
        except (subprocess.TimeoutExpired, OSError) as err:
            said = str(err)
            continue
        if "pbs_version" in f"{proc.stdout}{proc.stderr}":
            return None
        said = _first_line(proc.stderr) or _first_line(proc.stdout) or f"exit {proc.returncode}"
        if proc.returncode == 0 or _unsupported(proc):
            return (f"{_located(qstat)} is not PBS Pro's qstat (`qstat --version` said: "
                    f"{said!r}; the pbs-pro executor needs `qstat -x -f`): {PBS_PRO_PATH_HINT}")
    return (f"`{_located(qstat)} --version` failed {max(1, attempts)} times (last: {said!r}): "
            "the PBS server may be busy or unreachable; run the same command again when "
            "`qstat -Q` answers")


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


# ----------------------------------------------------------------------------- markers


def safe_name(text: str, limit: int = 200) -> str:
    """`text` reduced to ``[A-Za-z0-9_.-]`` (for file names and job names)."""
    out = re.sub(r"[^A-Za-z0-9_.-]", "_", str(text)).strip("._") or "job"
    return out[:limit]


def marker_path(jobid: str, state_dir: str | os.PathLike = STATE_DIR) -> Path:
    """Return the file where the job wrapper records the jobscript's exit status."""
    return Path(state_dir) / f"{safe_name(jobid)}.exit"


def write_marker(jobid: str, status: int, state_dir: str | os.PathLike = STATE_DIR) -> None:
    """Record `status` as the exit status of `jobid` (atomically: temporary name, rename)."""
    path = marker_path(jobid, state_dir)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(f"{status}\n")
    tmp.replace(path)


def read_marker(jobid: str, state_dir: str | os.PathLike = STATE_DIR) -> int | None:
    """Return the recorded exit status of `jobid`, or None if the job did not record one."""
    path = marker_path(jobid, state_dir)
    try:
        return int(path.read_text().strip())
    except (OSError, ValueError):
        return None


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


def _verdict(jobid: str, rec: dict | None, *, state_dir, runner, log, waits=(0, 2),
             accounting=True) -> str:
    """Decide one job from its ``qstat`` record.

    Without a record, or without an exit status in it: from the exit status its wrapper
    recorded, then (`accounting`) Slurm's; else ``failed``.
    """
    if rec is not None:
        verdict = classify(rec)
        if verdict is not None:
            if verdict == "failed":
                code = _exit_status(rec)
                log(f"job {jobid} failed: {describe_exit(code)}; {rec.get('comment', '')}")
            return verdict
    # Finished without an exit status (Torque wrapper) or no longer known to qstat.
    for wait in waits:
        time.sleep(wait)
        marker = read_marker(jobid, state_dir)
        if marker is not None:
            return "success" if marker == 0 else "failed"
    accounted = sacct_status(jobid, runner=runner) if accounting else None
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


def array_parent(jobid: str) -> str:
    """Return the whole-array id (``123[].server``) of a sub-job id (``123[4].server``).

    Other ids are returned unchanged.
    """
    return re.sub(r"^(\d+)\[\d*\]", r"\1[]", jobid)


def query_many(jobids: list[str], *, qstat: str = "qstat", attempts: int = 4,
               delay: float = 2.0, runner=_run) -> dict[str, dict | None]:
    """Ask ONE ``qstat -x -f -t`` call about all `jobids`.

    The text form (:func:`parse_torque`) is read, not ``-F json``: with several job ids,
    OpenPBS 23.06.06 prints only the first job's JSON document (openpbs/openpbs issue
    #2672; seen on the CI server), while the text form lists them all, with the same
    ``job_state`` and ``Exit_status``. Sub-job ids (``123[4].server``) are asked for
    through their array (``123[].server``; ``-t`` lists its sub-jobs), each array once.

    Returns
    -------
    dict
        Every id of `jobids` -> its record, or None when PBS no longer knows it (purged
        from the history: ``qstat: Unknown Job Id``, exit status 153, the other jobs
        are still printed).

    Raises
    ------
    QstatUnusable
        At once, without retrying, when ``qstat`` is missing, rejects ``-x -f -t`` or
        prints no ``Job Id:`` records (not PBS Pro's ``qstat``).
    QstatError
        When ``qstat`` keeps failing otherwise (server busy, timeout) after `attempts`
        tries with growing delays.
    """
    asked = list(dict.fromkeys(array_parent(j) for j in jobids))
    cmd = [qstat, "-x", "-f", "-t", *asked]
    last = ""
    for attempt in range(attempts):
        if attempt:
            time.sleep(delay * attempt)
        try:
            proc = runner(cmd)
        except FileNotFoundError:
            raise QstatUnusable(f"{qstat} not found on PATH: {PBS_PRO_PATH_HINT}") from None
        except (subprocess.TimeoutExpired, OSError) as err:
            last = f"{cmd[0]}: {err}"
            continue
        if _unsupported(proc):
            said = _first_line(proc.stderr) or _first_line(proc.stdout)
            raise QstatUnusable(
                f"{_located(qstat)} rejects `qstat -x -f -t` ({said!r}): it is not PBS Pro's "
                f"qstat (Torque's, or Slurm's Torque wrapper); {PBS_PRO_PATH_HINT}")
        unknown = re.search(r"Unknown Job Id", proc.stderr or "", re.I)
        if proc.returncode != 0 and not (unknown and proc.returncode == UNKNOWN_JOB_RC):
            said = " ".join((proc.stderr or "").split())[:300]
            last = f"{cmd[0]}: exit {proc.returncode}: {said}"
            continue
        jobs = parse_torque(proc.stdout)
        if proc.stdout.strip() and not jobs:
            raise QstatUnusable(
                f"{_located(qstat)} -x -f -t printed no 'Job Id:' records "
                f"({_first_line(proc.stdout)!r}): it is not PBS Pro's qstat; "
                f"{PBS_PRO_PATH_HINT}")
        return {j: _lookup(jobs, j) for j in jobids}
    raise QstatError(last or "qstat failed")


def marker_statuses(jobids: list[str], state_dir: str | os.PathLike = STATE_DIR
                    ) -> dict[str, str]:
    """Verdicts from the exit statuses job wrappers recorded; ``running`` where none is."""
    out = {}
    for j in jobids:
        marker = read_marker(j, state_dir)
        out[j] = "running" if marker is None else ("success" if marker == 0 else "failed")
    return out


def statuses(jobids: list[str], *, state_dir: str | os.PathLike = STATE_DIR,
             qstat: str = "qstat", attempts: int = 4, delay: float = 2.0, runner=_run,
             log=None, strict: bool = False) -> dict[str, str]:
    """``running``/``success``/``failed`` for every id of `jobids`, from ONE ``qstat``.

    The same rules as :func:`status` (PBS Pro only, :func:`query_many`): ``Exit_status`` 0 is
    ``success``, anything else (−27, −29, 265, 271, a script's own status) ``failed``;
    a purged job is decided by the exit status its wrapper recorded. When ``qstat``
    keeps failing (:class:`QstatError`): with `strict` the error is raised (the caller
    counts failed polls), else jobs with a recorded exit status are decided by it and
    the others stay ``running`` (asked again at the next poll).

    Raises
    ------
    QstatUnusable
        Always, when the ``qstat`` on PATH is missing or not PBS Pro's.
    QstatError
        With `strict`, when ``qstat`` keeps failing `attempts` times.
    """
    log = log or _log_stderr
    if not jobids:
        return {}
    try:
        recs = query_many(jobids, qstat=qstat, attempts=attempts, delay=delay, runner=runner)
    except QstatUnusable:
        raise
    except QstatError as err:
        if strict:
            raise
        log(f"qstat keeps failing ({err}); jobs without a recorded exit status stay running")
        return marker_statuses(jobids, state_dir)
    # PBS Pro ids are not Slurm ids: no sacct fallback here.
    return {j: _verdict(j, recs[j], state_dir=state_dir, runner=runner, log=log, waits=(0,),
                        accounting=False)
            for j in jobids}


# ----------------------------------------------------------------------------- submit


def read_properties(jobscript: str | os.PathLike) -> dict:
    """Return the ``# properties = {...}`` JSON Snakemake writes into each jobscript."""
    with open(jobscript, encoding="utf-8") as fh:
        for line in fh:
            if line.startswith("# properties = "):
                return json.loads(line[len("# properties = "):])
    raise ValueError(f"{jobscript}: no '# properties' line (not a Snakemake jobscript?)")


def walltime(minutes: float) -> str:
    """PBS ``HH:MM:SS`` for `minutes` (rounded up to whole minutes, at least 1)."""
    total = max(1, int(math.ceil(float(minutes))))
    return f"{total // 60:02d}:{total % 60:02d}:00"


def parse_walltime(text: str) -> int:
    """Minutes in a ``HH:MM:SS`` walltime."""
    parts = [int(p) for p in text.split(":")]
    while len(parts) < 3:
        parts.insert(0, 0)
    h, m, s = parts
    return h * 60 + m + (1 if s else 0)


def job_name(props: dict, prefix: str = "nc") -> str:
    """Return a PBS-safe job name: ``[A-Za-z0-9_.-]``, starting with a letter, <= 64."""
    if props.get("type") == "group":
        base = f"group_{props.get('groupid', '')}"
    else:
        wc = "_".join(str(v) for v in (props.get("wildcards") or {}).values())
        base = f"{props.get('rule', 'job')}_{wc}" if wc else str(props.get("rule", "job"))
    name = safe_name(f"{prefix}_{base}", limit=64)
    return name if name[0].isalpha() else f"j{name}"[:64]


#: Resident memory of the Snakemake process that runs a job inside its PBS job (with the
#: job's shells), in MB; PBS's MoM counts it against the job's ``mem`` as it counts the
#: rule's own processes. Measured on OpenPBS 23.06 with Snakemake 9.27 (Python 3.11): for
#: a Snakefile that imports nothing, a rule that only sleeps used ``resources_used.mem`` =
#: 173 MB, of which the job's ``python -m snakemake`` process had a peak (``VmHWM``) of
#: 160 MB; a Snakefile that imports the scientific stack at parse time (ncreel's: numpy,
#: xarray, matplotlib) adds about 70 MB to that (226 MB peak for ``snakemake -n``), and its
#: shard jobs used 515-545 MB for a rule process declared at 300 MB. 300 covers both; the
#: setting ``pbs-pro-job-overhead-mb`` changes it.
DEFAULT_JOB_OVERHEAD_MB = 300

#: Environment variable that tells a job's own Snakemake how many MB the executor added
#: to its ``mem`` request (so a workflow that adds such an overhead itself can leave it out).
JOB_OVERHEAD_ENV = "SNAKEMAKE_PBS_PRO_JOB_OVERHEAD_MB"


def request_mem_mb(mem_mb: float, job_overhead_mb: int = DEFAULT_JOB_OVERHEAD_MB) -> int:
    """Return the ``mem`` (MB) to ask PBS for: the rule's `mem_mb` plus Snakemake's own.

    A PBS job runs the rule inside a ``snakemake`` process of its own, and MoM kills the
    job (``Exit_status`` −27, JOB_EXEC_KILL_MEM) when all its processes together exceed
    ``mem``: a rule declaring ``mem="5MB"`` would be killed at once. So the request is the
    rule's own declared memory (what its commands need) plus `job_overhead_mb`.

    Parameters
    ----------
    mem_mb : float
        The job's ``mem_mb`` resource, MB (Snakemake derives it from ``mem`` too).
    job_overhead_mb : int
        Memory of the job's own Snakemake process, MB (:data:`DEFAULT_JOB_OVERHEAD_MB`).

    Returns
    -------
    int
        MB, rounded up.

    Raises
    ------
    ValueError
        When `job_overhead_mb` is negative.
    """
    if job_overhead_mb < 0:
        raise ValueError(f"pbs-pro-job-overhead-mb must be 0 or more, got {job_overhead_mb}")
    return int(math.ceil(float(mem_mb))) + int(job_overhead_mb)


def build_qsub(props: dict, jobscript: str, *, queue: str | None, account: str | None,
               log_dir: str, max_walltime: str | None = None, node_cores: int | None = None,
               node_mem_gb: int | None = None, default_mem_mb: int = 1000,
               default_runtime: int = 30, extra_l: list[str] | None = None,
               prefix: str = "nc", array_size: int | None = None,
               log_tag: str | None = None, job_overhead_mb: int = 0) -> list[str]:
    """Return the ``qsub`` argument list for one Snakemake job (no shell involved).

    One ``-l select=1:ncpus=N:mem=XMB,walltime=HH:MM:SS`` (Slurm's Torque wrapper keeps
    only the last ``-l``, PBS Pro accepts the combined form). With `node_cores` the job
    asks for a whole node (``ncpus=node_cores:mem=node_mem_gbGB``): for queues that
    charge whole nodes anyway (Derecho ``main``). With `array_size` N (>= 2, OpenPBS
    refuses smaller ranges) the job is an array ``-J 0-(N-1)`` whose sub-jobs all get
    these resources, each its own log ``<name>.<log_tag>.<index>.log``. The ``mem`` asked
    for is :func:`request_mem_mb` of the job's ``mem_mb`` and `job_overhead_mb`, which the
    job's own Snakemake learns from ``$SNAKEMAKE_PBS_PRO_JOB_OVERHEAD_MB`` (``qsub -v``).
    """
    res = props.get("resources") or {}
    threads = max(1, int(props.get("threads") or 1))
    mem_mb = request_mem_mb(res.get("mem_mb") or default_mem_mb, job_overhead_mb)
    minutes = float(res.get("runtime") or default_runtime)
    if max_walltime:
        minutes = min(minutes, parse_walltime(max_walltime))
    if node_cores:
        if threads > node_cores:
            raise ValueError(f"job wants {threads} cores; a node has {node_cores}")
        chunk = f"select=1:ncpus={node_cores}"
        chunk += f":mem={node_mem_gb}GB" if node_mem_gb else ""
    else:
        chunk = f"select=1:ncpus={threads}:mem={mem_mb}MB"
    limits = ",".join([chunk, f"walltime={walltime(minutes)}", *(extra_l or [])])
    name = job_name(props, prefix)
    tag = log_tag or props.get("jobid", "x")
    if array_size is not None:
        if array_size < 2:
            raise ValueError(f"a PBS job array needs at least 2 sub-jobs, got {array_size}")
        log = Path(log_dir) / f"{name}.{tag}.^array_index^.log"
    else:
        log = Path(log_dir) / f"{name}.{tag}.log"
    cmd = ["qsub", "-N", name, "-j", "oe", "-o", str(log), "-V", "-l", limits]
    if job_overhead_mb:
        cmd += ["-v", f"{JOB_OVERHEAD_ENV}={int(job_overhead_mb)}"]
    if array_size is not None:
        cmd += ["-J", f"0-{array_size - 1}"]
    if account:
        cmd += ["-A", account]
    if queue:
        cmd += ["-q", queue]
    return [*cmd, str(jobscript)]


def write_wrapper(jobscript: str | os.PathLike, state_dir: str | os.PathLike) -> Path:
    """Write a job script that runs `jobscript` and records its exit status by job id."""
    jobscript = Path(jobscript).resolve()
    state = Path(state_dir).resolve()
    state.mkdir(parents=True, exist_ok=True)
    wrapper = jobscript.with_name(jobscript.name + ".pbs.sh")
    wrapper.write_text(
        "#!/bin/bash\n"
        "# Written by ncreel.cluster.pbs: runs the Snakemake jobscript, records its exit status.\n"
        f"/bin/sh {shlex.quote(str(jobscript))}\n"
        "status=$?\n"
        'id="${PBS_JOBID:-${SLURM_JOB_ID:-unknown}}"\n'
        "name=$(printf '%s' \"$id\" | tr -c 'A-Za-z0-9_.-' '_')\n"
        f"dir={shlex.quote(str(state))}\n"
        "printf '%s\\n' \"$status\" > \"$dir/$name.exit.tmp\" && "
        "mv -f \"$dir/$name.exit.tmp\" \"$dir/$name.exit\"\n"
        'exit "$status"\n'
    )
    wrapper.chmod(0o755)
    return wrapper


class SubmitError(RuntimeError):
    """A job cannot be submitted (no project account, no ``qsub``, ``qsub`` refused it)."""


class MissingAccount(SubmitError):
    """The project account's environment variable is unset (its message says what to do)."""


def project_account(account_env: str = ACCOUNT_ENV, *, no_account: bool = False,
                    environ=None) -> str | None:
    """Return the project account for ``qsub -A``, from the environment variable `account_env`.

    The one place the account is checked: the ``qsub`` CLI, the ``pbs-pro`` executor
    plugin and the workflow's parse-time check all call it.

    Parameters
    ----------
    account_env : str
        Name of the environment variable (``PBS_ACCOUNT`` unless the profile says otherwise).
    no_account : bool
        The site needs no account: return None without looking.
    environ : mapping, optional
        Environment to read (default: ``os.environ``).

    Returns
    -------
    str or None
        The account, or None when `no_account`.

    Raises
    ------
    MissingAccount
        The variable is unset or empty and an account is needed.
    """
    if no_account:
        return None
    account = (os.environ if environ is None else environ).get(account_env)
    if not account:
        raise _missing_account(account_env)
    return account


def _missing_account(account_env: str) -> MissingAccount:
    return MissingAccount(f"{account_env} is unset: export {account_env}=<project code> "
                          "(NCAR: from `gladequota`/`sam`), then run the same command again")


def submit(jobscript: str, *, queue: str | None, account: str | None, log_dir: str,
           state_dir: str = STATE_DIR, require_account: bool = True, runner=_run,
           account_env: str = ACCOUNT_ENV, **kw) -> str:
    """Submit `jobscript` with ``qsub``; return the job id ``qsub`` printed.

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
    cmd = build_qsub(props, str(wrapper), queue=queue, account=account, log_dir=log_dir, **kw)
    try:
        return run_qsub(cmd, runner=runner)
    except QsubError as err:
        raise SubmitError(str(err)) from None


class QsubError(RuntimeError):
    """``qsub`` refused a job (its message says why: unknown queue, bad resources...)."""


def run_qsub(cmd: list[str], runner=_run) -> str:
    """Run the ``qsub`` argument list `cmd` (no shell); return the job id it printed.

    The exact command is saved next to the job's log (``-o`` path, suffix ``.qsub``)
    for post-mortems.

    Raises
    ------
    QsubError
        If ``qsub`` fails or prints no job id.
    """
    log = cmd[cmd.index("-o") + 1].replace(".^array_index^", "")
    Path(log).with_suffix(".qsub").write_text(shlex.join(cmd) + "\n")
    proc = runner(cmd, timeout=120)
    if proc.returncode != 0:
        raise QsubError(f"{shlex.join(cmd)} failed (exit {proc.returncode}): "
                        f"{proc.stderr.strip()}")
    jobid = proc.stdout.strip().splitlines()[0].strip() if proc.stdout.strip() else ""
    if not jobid:
        raise QsubError(f"qsub printed no job id: {shlex.join(cmd)}")
    return jobid


# ----------------------------------------------------------------------------- checks


def log_dir_problem(log_dir: str | os.PathLike) -> str | None:
    """One line refusing a relative `log_dir` that leads out of the working directory, or None.

    ``../..`` would scatter job logs (and the ``qsub`` records next to them) into other
    people's folders without a word; a directory outside is given as an absolute path.
    """
    text = os.fspath(log_dir)
    if not text.strip():
        return "pbs-pro-log-dir is empty: name a directory (default logs/pbs)"
    if os.path.isabs(text):
        return None
    norm = os.path.normpath(text)
    if norm == ".." or norm.startswith(".." + os.sep):
        return (f"pbs-pro-log-dir {text!r} leads out of the working directory: give a "
                f"directory inside it, or an absolute path ({os.path.abspath(text)}) if "
                "the logs belong there")
    return None


def profile_queue(submit_cmd: str, env=None) -> str | None:
    """Return the queue a PBS profile's submit command sends jobs to.

    ``$NCREEL_PBS_QUEUE`` when set, else the ``--queue`` option of `submit_cmd` (the
    profile's ``cluster-generic-submit-cmd``); None when neither names one. A queue may
    name another server: ``queue@server``.
    """
    env = os.environ if env is None else env
    if env.get("NCREEL_PBS_QUEUE"):
        return env["NCREEL_PBS_QUEUE"]
    args = shlex.split(submit_cmd or "")
    for i, arg in enumerate(args):
        if arg == "--queue" and i + 1 < len(args):
            return args[i + 1]
        if arg.startswith("--queue="):
            return arg.split("=", 1)[1]
    return None


def queue_problem(queue: str, runner=_run, attempts: int = 3, delay: float = 2.0,
                  sleep=time.sleep) -> str | None:
    """One line saying that PBS does not know `queue` (``queue`` or ``queue@server``), or None.

    Asks ``qstat -Q <queue>``. PBS's "Unknown queue" and "illegal destination" answers are
    problems; so is a named ``@server`` that does not answer `attempts` times (pauses of
    `delay` x attempt seconds): its jobs could not be submitted or followed. A missing
    ``qstat`` or a default server that does not answer leaves the verdict to ``qsub`` and
    the executor's retries. The message lists the queues the server has.
    """
    _, _, server = queue.partition("@")
    for attempt in range(max(1, attempts)):
        if attempt:
            sleep(delay * attempt)
        try:
            proc = runner(["qstat", "-Q", queue], timeout=60)
        except (subprocess.TimeoutExpired, OSError):
            return None
        said = " ".join((proc.stderr or "").split())
        if proc.returncode == 0:
            return None
        if "illegal 'destination'" in said.lower() or "illegally formed" in said.lower():
            return (f"PBS queue {queue!r} is not a valid destination (qstat: {said}): set "
                    "NCREEL_PBS_QUEUE=<queue> or <queue>@<server>, or use the profile of "
                    "your site")
        if "unknown queue" in said.lower():
            break
        if not server:
            return None
    else:
        return (f"PBS server '{server}' of queue '{queue}' does not answer (qstat -Q said "
                f"{attempts} times: {said}): check the server name in NCREEL_PBS_QUEUE or "
                "pbs-pro-queue, or run the same command again when `qstat -Q @"
                f"{server}` answers")
    where = f"on PBS server '{server}'" if server else "on the PBS server"
    known = ""
    try:
        listed = runner(["qstat", "-Q", *([f"@{server}"] if server else [])], timeout=60)
        names = [ln.split()[0] for ln in listed.stdout.splitlines()[2:] if ln.strip()]
        known = f" (queues there: {', '.join(names)})" if names else ""
    except (subprocess.TimeoutExpired, OSError, IndexError):
        pass
    return (f"PBS queue '{queue}' does not exist {where}{known}: set NCREEL_PBS_QUEUE="
            "<queue> or <queue>@<server>, or use the profile of your site")


# ----------------------------------------------------------------------------- CLI


def _pbs_active_jobs(run, servers=()) -> dict[str, dict] | None:
    """Queued, held and running jobs of the default PBS server and of `servers`."""
    jobs, answered = {}, False
    for where in (None, *servers):
        out = run(["qstat", "-f", "-F", "json", *([f"@{where}"] if where else [])])
        if out is None:
            continue
        try:
            jobs.update(json.loads(out).get("Jobs") or {})
            answered = True
        except (ValueError, AttributeError):
            continue
    return jobs if answered else None


def pbs_peer_servers(workdir=".", env=None) -> list[str]:
    """PBS servers a run in `workdir` may have sent jobs to, besides the default one.

    The servers named in the ``pbs-pro`` executor's journal (the suffix of each job id it
    recorded, ``123.casper-pbs``) and in ``$NCREEL_PBS_QUEUE`` (``queue@server``).
    NCAR's Casper and Derecho are separate PBS servers: the default one does not list
    the other's jobs.
    """
    env = os.environ if env is None else env
    servers = []
    queue = env.get("NCREEL_PBS_QUEUE") or ""
    if "@" in queue:
        servers.append(queue.split("@", 1)[1])
    journal = Path(workdir, STATE_DIR, "journal.jsonl")
    try:
        lines = journal.read_text().splitlines()
    except OSError:
        lines = []
    for line in lines:
        try:
            jobid = json.loads(line).get("submit") or ""
        except (ValueError, AttributeError):
            continue  # a line cut short by a kill
        server = jobid.partition(".")[2]
        if server:
            servers.append(server)
    return list(dict.fromkeys(servers))


def cancel_orphan_pbs_jobs(workdir=".", run=stdout_of, cancel=None, timeout=120.0,
                           poll=2.0) -> list[str]:
    """Delete PBS jobs that a killed Snakemake run submitted from `workdir`; wait for them.

    The PBS counterpart of :func:`ncreel.cluster.slurm.cancel_orphan_slurm_jobs`, with the
    same precondition (the run is known dead). Snakemake's jobs are recognised in ``qstat -f
    -F json`` (the queued, held and running jobs of the default server and of the peer
    servers the run used, :func:`pbs_peer_servers`) by ``Variable_List.PBS_O_WORKDIR``
    (where ``qsub`` ran) being `workdir` and by their submission naming a jobscript under
    ``.snakemake/`` (``Submit_arguments``), which every Snakemake executor writes there.
    Then ``qdel`` deletes them, and this waits until PBS no longer lists them (at most
    `timeout` seconds), so that no output is worked on by an old and a new job at once.

    Parameters
    ----------
    workdir : path
        The Snakemake working directory.
    run : callable
        ``run(argv) -> stdout or None`` (None: command missing or failed).
    cancel : callable, optional
        ``cancel(ids)``; default ``qdel <ids>``.
    timeout, poll : float
        Seconds to wait for the deleted jobs to leave, and between checks.

    Returns
    -------
    list of str
        The deleted job ids (as PBS names them, e.g. ``1234.desched1``).
    """
    peers = pbs_peer_servers(workdir)
    jobs = _pbs_active_jobs(run, peers)
    if not jobs:
        return []
    here = os.path.realpath(workdir)
    ids = []
    for jobid, rec in jobs.items():
        env = rec.get("Variable_List") or {}
        wd = env.get("PBS_O_WORKDIR", "") if isinstance(env, dict) else ""
        args = str(rec.get("Submit_arguments", ""))
        if wd and os.path.realpath(wd) == here and "/.snakemake/" in f"/{args}":
            ids.append(jobid)
    if not ids:
        return []
    (cancel or (lambda i: run(["qdel", *i])))(ids)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        left = _pbs_active_jobs(run, peers)
        if left is None or not set(ids) & set(left):
            break
        time.sleep(poll)
    return ids


def main(argv: list[str] | None = None) -> int:
    """Command-line entry: ``submit`` and ``status`` (see the module docstring)."""
    ap = argparse.ArgumentParser(prog="ncreel-pbs", description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    sp = sub.add_parser("submit", help="qsub a Snakemake jobscript; print the job id")
    sp.add_argument("jobscript")
    sp.add_argument("--queue", default=None,
                    help="queue (overridden by $NCREEL_PBS_QUEUE when set)")
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
    st = sub.add_parser("status", help="print running/success/failed for a job id")
    st.add_argument("jobid")
    st.add_argument("--state-dir", default=STATE_DIR)
    st.add_argument("--attempts", type=int, default=4)
    args = ap.parse_args(argv)
    if args.cmd == "submit":
        queue = os.environ.get("NCREEL_PBS_QUEUE") or args.queue
        try:
            account = project_account(args.account_env, no_account=args.no_account)
            jobid = submit(args.jobscript, queue=queue, account=account, log_dir=args.log_dir,
                           state_dir=args.state_dir, require_account=not args.no_account,
                           account_env=args.account_env, max_walltime=args.max_walltime,
                           node_cores=args.node_cores, node_mem_gb=args.node_mem_gb,
                           extra_l=args.extra_l)
        except SubmitError as err:
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


if __name__ == "__main__":
    sys.exit(main())
