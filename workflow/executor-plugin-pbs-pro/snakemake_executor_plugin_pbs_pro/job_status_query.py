"""The status query: ONE ``qstat -x -f -t`` for all active jobs, and its verdicts.

Exit-status conventions (PBS Pro, from OpenPBS ``src/include/job.h`` and the PBS
Professional reference guide): ``0`` success; ``1..255`` the job script's own exit
status; ``> 256`` killed by signal ``status - 256`` (e.g. ``271`` = SIGTERM at the
walltime limit on older servers); negative values are ``JOB_EXEC_*`` codes, e.g.
``-27`` JOB_EXEC_KILL_MEM, ``-29`` JOB_EXEC_KILL_WALLTIME, ``-11`` JOB_EXEC_RERUN.
Everything other than ``0`` is a failure. A job deleted with ``qdel`` ends in substate
91 (``JOB_SUBSTATE_TERMINATED``, ``src/server/svr_jobfunc.c``; measured on OpenPBS 23.06):
while running, with ``Exit_status`` 143 or 271 (its shell ended by SIGTERM) and the
comment ``... and terminated by <user>@<host>``; while queued or held, with neither.
Walltime and memory kills end in substate 93 (``JOB_SUBSTATE_FAILED``), ``-29`` and
``-27``. Standard library only.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time

from snakemake_executor_plugin_pbs_pro.state import STATE_DIR, marker_statuses, read_marker

#: PBS Pro / Torque job states that mean "not finished yet".
#: Q queued, R running, H held, W waiting, T transit, B array begun, E exiting (still
#: cleaning up: Exit_status may not be final), S/U suspended, M moved.
ACTIVE_STATES = frozenset("QRHWTBESUM")

#: F finished (PBS Pro, with -x), X finished subjob, C completed (Torque, Slurm wrapper).
DONE_STATES = frozenset("FXC")

#: ``substate`` of a finished job that was deleted (``qdel``; also a scheduler's
#: preemption by deletion): ``JOB_SUBSTATE_TERMINATED`` in OpenPBS ``src/include/job.h``.
TERMINATED_SUBSTATE = 91

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

def deletion(rec: dict) -> str | None:
    """Say how a finished job was deleted (``qdel``), or None when it was not.

    A record in state F or X with ``substate`` 91 (:data:`TERMINATED_SUBSTATE`) was
    deleted; its comment names who deleted a running job (``... and terminated by
    user@host``, possibly wrapped by ``qstat`` over continuation lines). A job deleted
    before it started has no comment and no ``stime``.

    Returns
    -------
    str or None
        ``"deleted with qdel by user@host"``, ``"deleted with qdel before it started"``,
        ``"deleted with qdel"``; None for a job that is still active or ended otherwise.
    """
    state = str(rec.get("job_state", "")).strip()[:1].upper()
    if state not in ("F", "X") or str(rec.get("substate", "")).strip() != str(
            TERMINATED_SUBSTATE):
        return None
    m = re.search(r"terminated\s*by\s*(\S+)", str(rec.get("comment") or ""))
    if m:
        return f"deleted with qdel by {m.group(1)}"
    if not rec.get("stime") and _exit_status(rec) is None:
        return "deleted with qdel before it started"
    return "deleted with qdel"

#: The comment OpenPBS gives a sub-job that has no job of its own (it never ran, or was
#: purged), whose record it fakes from its array's (``status_subjob`` in
#: ``src/server/stat_job.c``): substate, ``stime`` and ``Exit_status`` are the array's.
SUBJOB_FINISHED_COMMENT = "Subjob finished"


def faked_subjob(jobid: str, rec: dict) -> bool:
    """Whether `rec`, the record of sub-job `jobid`, is faked from its array's.

    Then its substate and ``Exit_status`` are the array's, not the sub-job's: a sub-job
    still queued when its array is deleted with ``qdel`` reads, until the running
    sub-jobs are gone (up to the MoM's ``kill_delay``), ``job_state`` X, the array's
    substate (70, begun), comment ``Subjob finished``, then the array's ``Exit_status``
    (1), and only then substate 91 (measured on OpenPBS 23.06). What the sub-job's own
    script did is in the exit status its wrapper recorded (``state.read_marker``); a
    sub-job that finished without recording one never ran: its array was deleted.
    """
    state = str(rec.get("job_state", "")).strip()[:1].upper()
    return ("[" in jobid and state in ("F", "X")
            and str(rec.get("comment") or "").strip() == SUBJOB_FINISHED_COMMENT)


def describe_exit(status: int) -> str:
    """Human-readable meaning of a PBS exit status (for logs)."""
    if status in JOB_EXEC_CODES:
        return JOB_EXEC_CODES[status]
    if status > 256:
        return f"killed by signal {status - 256}"
    if status > 128:
        return f"exited {status} (shell: signal {status - 128})"
    return f"exit status {status}"

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

def _verdict(jobid: str, rec: dict | None, *, state_dir, log, deleted=None) -> str:
    """Decide one job from its ``qstat`` record.

    A job deleted with ``qdel`` (:func:`deletion`) is ``deleted``, its reason put in the
    dict `deleted` (when given; else it is ``failed``). Without a record (purged from the
    server's history), or without an exit status in it: from the exit status its wrapper
    recorded; else ``failed``.
    """
    if rec is not None and faked_subjob(jobid, rec):
        marker = read_marker(jobid, state_dir)
        if marker is not None:
            return "success" if marker == 0 else "failed"
        if deleted is not None:
            deleted[jobid] = "deleted with qdel before it started (its array was deleted)"
            return "deleted"
        log(f"job {jobid} ended before it started (its array was deleted?): failed")
        return "failed"
    if rec is not None and deleted is not None:
        reason = deletion(rec)
        if reason:
            deleted[jobid] = reason
            return "deleted"
    if rec is not None:
        verdict = classify(rec)
        if verdict is not None:
            if verdict == "failed":
                code = _exit_status(rec)
                log(f"job {jobid} failed: {describe_exit(code)}; {rec.get('comment', '')}")
            return verdict
    marker = read_marker(jobid, state_dir)
    if marker is not None:
        return "success" if marker == 0 else "failed"
    log(f"job {jobid} ended without recording an exit status (killed for memory or "
        "walltime, or cancelled): failed")
    return "failed"


def _log_stderr(msg: str) -> None:
    print(f"pbs-pro: {msg}", file=sys.stderr)

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

def statuses(jobids: list[str], *, state_dir: str | os.PathLike = STATE_DIR,
             qstat: str = "qstat", attempts: int = 4, delay: float = 2.0, runner=_run,
             log=None, strict: bool = False, deleted: dict | None = None
             ) -> dict[str, str]:
    """``running``/``success``/``failed`` for every id of `jobids`, from ONE ``qstat``.

    With a dict `deleted`, a job deleted with ``qdel`` (:func:`deletion`) is
    ``deleted`` instead of ``failed``, and ``deleted[id]`` says by whom.

    PBS Pro only (:func:`query_many`): ``Exit_status`` 0 is
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
    return {j: _verdict(j, recs[j], state_dir=state_dir, log=log, deleted=deleted)
            for j in jobids}
