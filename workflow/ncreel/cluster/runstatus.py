"""Which shards of a run are done, running, failed or still to do; starts nothing.

``python -m ncreel.cluster.runstatus [--run NAME] [--workdir DIR]`` (``make status RUN=NAME``)
reads only files: the plan (``results/<run>/stats.json`` ``n_time`` and
``calibration.json`` ``frames_per_shard``), each shard's outputs, Snakemake's incomplete
markers (``.snakemake/incomplete/``, which hold the scheduler's job id of a submitted job),
and each shard job's attempts record (:mod:`ncreel.run.jobrecord`). Only for a job that a
scheduler ran does it ask the scheduler (``squeue`` / PBS ``qstat``) whether the job is
still there.

States: ``done`` (its outputs for the run's config ``outputs`` complete: the segment, the
COPY rows or both; and newer than ``stats.json`` and ``calibration.json``, as Snakemake
judges it), ``running`` (a live process or scheduler job:
queued or running; or marked by the Snakemake that holds the run's lock and not yet
started), ``failed`` (its newest attempt raised, was killed, or its process or scheduler
job is gone without finishing while its Snakemake runs on; the next run redoes it),
``interrupted`` (its job was under way when its Snakemake stopped -- Ctrl-C, a closed
SSH session, kill -9 -- and no process holds the run's lock now; the same command resumes
it), ``to do`` (never started, or its outputs are older than the run's statistics or
plan, which a rerun with other settings rewrites first).

The run as a whole is *running* while a Snakemake process holds its lock
(``results/<run>/.ncreel-run.lock``, see :func:`ncreel.cluster.runlock.hold_run_lock`),
else *complete* or *interrupted*.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

from ncreel.cluster.runlock import run_lock_holder
from ncreel.config.settings import COPY_SUFFIXES, OUTPUTS, Calibration
from ncreel.core.errors import NcreelError
from ncreel.run.incomplete import marked_incomplete, marker_path
from ncreel.run.jobrecord import attempt_count, attempts_path, read_attempts
from ncreel.run.shardplan import plan_shards

#: A shard whose job finished, its incomplete marker left by a stopped Snakemake.
UNRECORDED = "finished, but its Snakemake was stopped before recording it: "


def _incomplete_marker(workdir: Path, output: str) -> dict | None:
    # Snakemake's FilePersistence mark (ncreel.run.incomplete); content {"external_jobid": ...}.
    path = marker_path(workdir, output)
    try:
        marker = json.loads(path.read_text() or "{}")
        # When Snakemake wrote it: a job that ended after this belongs to the marker.
        return {**marker, "mtime": path.stat().st_mtime}
    except (FileNotFoundError, json.JSONDecodeError):
        return None if not path.exists() else {}


def _pid_alive(pid) -> bool:
    try:
        os.kill(int(pid), 0)
    except (ProcessLookupError, TypeError, ValueError):
        return False
    except PermissionError:
        return True
    return True


#: PBS ``job_state`` letters of a job not yet ended, as ``ncreel status`` says them.
PBS_STATES = {"Q": "queued", "H": "held", "W": "waiting", "T": "in transit",
              "R": "running", "B": "running", "E": "exiting", "S": "suspended",
              "U": "suspended", "M": "moved"}


def scheduler_state(scheduler: str | None, jobid: str) -> str | None:
    """Ask the scheduler whether `jobid` is still queued/running.

    Returns
    -------
    str or None
        The scheduler's state (Slurm's ``PENDING``, ``RUNNING``; PBS's ``queued``,
        ``held``, ``running``...: :data:`PBS_STATES`) while the job
        exists and has not ended; None when it has ended or is unknown, or the scheduler's
        commands are not available.
    """
    if scheduler == "pbs" or (scheduler is None and "." in jobid):
        from ncreel.cluster import pbs

        qstat = pbs.find_qstat()
        if not qstat:
            return None
        try:
            _, rec = pbs.query(jobid, qstat=qstat, attempts=1, delay=0)
        except pbs.QstatUnusable:
            return None
        except pbs.QstatError:  # cannot tell: running unless it recorded its ending
            return None if pbs.read_marker(jobid) is not None else "running"
        if rec is None or pbs.classify(rec) != "running":
            return None
        return PBS_STATES.get(str(rec.get("job_state", "")).strip()[:1].upper(), "running")
    if shutil.which("squeue"):
        out = subprocess.run(["squeue", "-h", "-j", str(jobid), "-o", "%T"],
                             capture_output=True, text=True, timeout=60).stdout.strip()
        return out or None
    return None


def run_holder(workdir: str | os.PathLike = ".", run: str = "demo") -> int | None:
    """Return the pid of the Snakemake process running `run` in `workdir` now, or None.

    Returns
    -------
    int or None
        The pid that holds ``results/<run>/.ncreel-run.lock`` (0 when it is held but the
        pid is unreadable); None when no process holds it. Where the file system has no
        ``flock``, Snakemake's own lock (``.snakemake/locks/``) stands in: 0 if present.
    """
    work = Path(workdir)
    try:
        return run_lock_holder(work / "results" / run / ".ncreel-run.lock")
    except OSError:
        return 0 if any((work / ".snakemake" / "locks").glob("*.lock")) else None


def run_job_ids(workdir: str | os.PathLike = ".", run: str = "demo") -> frozenset[str]:
    """Scheduler job ids recorded for `run`'s jobs in `workdir`: queued or running ones.

    A submitted job's id is in Snakemake's incomplete marker of each of its outputs
    (written when it is submitted), and a started job's in its attempts record
    (:mod:`ncreel.run.jobrecord`; the job's own Snakemake rewrites the marker without it).

    Parameters
    ----------
    workdir : path
        The Snakemake working directory.
    run : str
        The run's name: its outputs are under ``results/<run>/``, its logs ``logs/<run>/``.

    Returns
    -------
    frozenset of str
        Job ids as the scheduler gave them (``123``, ``123.server``, ``123[4].server``).
    """
    work = Path(workdir)
    ids = set()
    for output in marked_incomplete(work):
        if output.startswith((f"results/{run}/", f"logs/{run}/")):
            marker = _incomplete_marker(work, output) or {}
            if marker.get("external_jobid"):
                ids.add(str(marker["external_jobid"]))
    for record in (work / "logs" / run).rglob("*.attempts.jsonl"):
        last = (read_attempts(record) or [{}])[-1]
        if last.get("status") == "running" and last.get("jobid"):
            ids.add(str(last["jobid"]))
    return frozenset(ids)


def shard_status(workdir: str | os.PathLike = ".", run: str = "demo", *,
                 ask_scheduler=scheduler_state) -> list[dict]:
    """Return the state of every shard in the run's plan.

    Parameters
    ----------
    workdir : path
        The directory Snakemake runs in (holds ``results/``, ``logs/``, ``.snakemake/``).
    run : str
        The run's name (config key ``run``).
    ask_scheduler : callable
        ``(scheduler, jobid) -> state or None``; see :func:`scheduler_state`.

    Returns
    -------
    list of dict
        ``shard``, ``frames``, ``state``, ``attempts``, ``jobid`` and ``detail`` per shard,
        and ``started``: whether its newest attempt has begun and not ended (its job's
        process runs now, as opposed to queued by the scheduler or not yet submitted).

    Raises
    ------
    FileNotFoundError
        If the run has no plan yet (statistics or calibrate_render has not run).
    """
    work = Path(workdir)
    out, logs = work / "results" / run, work / "logs" / run
    stats = json.loads((out / "stats.json").read_text())
    n_time = stats["n_time"]
    fps = Calibration.from_json(out / "calibration.json").frames_per_shard
    # A shard is done when every output its job makes for the run's config outputs is
    # there: the segment (movie) and the COPY rows (table), in whichever compression the
    # run writes; and, as Snakemake judges it, newer than the statistics and the plan
    # (a rerun after they changed, e.g. other config outputs, redoes the shard).
    wanted = stats.get("outputs") or OUTPUTS

    def shard_outputs(name: str) -> list[str]:
        paths = [f"results/{run}/segments/{name}.mp4"] if "movie" in wanted else []
        if "table" in wanted:
            rows = f"results/{run}/cells/{name}{COPY_SUFFIXES['none']}"
            for suffix in COPY_SUFFIXES.values():
                path = f"results/{run}/cells/{name}{suffix}"
                if (work / path).exists() or marker_path(work, path).exists():
                    rows = path
                    break
            paths.append(rows)
        return paths

    plan_mtime = max((out / f).stat().st_mtime for f in ("stats.json", "calibration.json"))
    host = socket.gethostname()
    # Snakemake's own lock outlives a Snakemake ended by SIGHUP or SIGKILL; ncreel's run
    # lock is a flock, which the kernel releases when the holder dies.
    held = run_holder(work, run) is not None
    rows = []
    for shard in plan_shards(n_time, fps):
        paths = shard_outputs(shard.name)
        marker = next((m for m in (_incomplete_marker(work, p) for p in paths)
                       if m is not None), None)
        attempts = read_attempts(attempts_path(logs / "process_shard" / f"{shard.name}.log"))
        last = attempts[-1] if attempts else {}
        jobid = (marker or {}).get("external_jobid") or last.get("jobid")
        written = all((work / p).exists() for p in paths)
        state, detail = "to do", ""
        if written and marker is None:
            if min((work / p).stat().st_mtime for p in paths) < plan_mtime:
                detail = "older than the run's statistics or plan: the next run redoes it"
            else:
                state = "done"
        elif marker is not None or last.get("status") == "running":
            live = None
            if jobid:
                live = ask_scheduler(last.get("scheduler"), str(jobid))
            elif last.get("status") == "running" and last.get("host") == host:
                live = "running" if _pid_alive(last.get("pid")) else None
            if live:
                state, detail = "running", live
            elif (written and last.get("status") == "ok"
                  and float(last.get("end") or 0) >= (marker or {}).get("mtime", math.inf)):
                # The marker's job ended well, but Snakemake was stopped before it removed
                # the marker: the next run redoes the job (the workflow's redo_interrupted,
                # as --rerun-incomplete), and a live one already counts it to do.
                state = "to do" if held else "interrupted"
                detail = UNRECORDED + ("this run redoes it" if held
                                       else "the same command redoes it")
            elif not jobid and last.get("status") != "running" and held:
                # Marked by a Snakemake still running here, before the job recorded itself
                # (a scheduler job's own Snakemake rewrites the marker without the job id).
                state, detail = "running", "starting"
            elif written and last.get("status") == "ok":
                # The job finished and wrote its outputs, but Snakemake was killed before
                # it removed its marker (kill -9): as above, the next run redoes it.
                state, detail = "interrupted", UNRECORDED + "the same command redoes it"
            elif held:
                state = "failed"
                detail = "ended without finishing (killed)"
            else:
                state = "interrupted"
                detail = "its run stopped before it finished: the same command resumes it"
        elif last.get("status") in ("failed", "killed"):
            state, detail = "failed", f"attempt {last.get('attempt')} {last['status']}"
            if last.get("reason"):  # why: a qdel/scancel is not a crash (jobrecord)
                detail += f": {last['reason']}" + (f" by {last['signal']}"
                                                   if last.get("signal") else "")
        if state == "done" and last.get("status") != "ok":
            detail = "no attempts record"
        rows.append({"shard": shard.name, "frames": shard.n_frames, "state": state,
                     "attempts": attempt_count(attempts), "jobid": jobid, "detail": detail,
                     "started": state == "running" and last.get("status") == "running"})
    return rows


def _job_attempts(workdir: str | os.PathLike, run: str):
    """Yield ``(record, attempts)`` of every job of `run` that has attempts."""
    for record in Path(workdir, "logs", run).rglob("*.attempts.jsonl"):
        attempts = read_attempts(record)
        if attempts:
            yield record, attempts


def _job_name(record: Path, attempt: dict) -> str:
    """``process_shard 00003``: the attempt's rule (else the log's name) and wildcards."""
    return " ".join([str(attempt.get("rule") or record.name.split(".")[0]),
                     *map(str, (attempt.get("wildcards") or {}).values())])


def disk_stop(workdir: str | os.PathLike = ".", run: str = "demo") -> str | None:
    """Return the line of `run`'s newest job that ended on a full disk, or None.

    Reads every job's attempts record under ``logs/<run>/``
    (:mod:`ncreel.run.jobrecord`): a job whose newest attempt failed with reason
    ``disk``, or refused to run again after one that did.

    Returns
    -------
    str or None
        The job (``process_shard 00003``) and the full disk's line as the job said it;
        None when no job's newest attempt ended on a full disk.
    """
    found = []
    for record, attempts in _job_attempts(workdir, run):
        disk = [a for a in attempts if a.get("reason") == "disk"]
        if disk and attempts[-1].get("reason") in ("disk", "not_retried"):
            found.append((float(disk[-1].get("end") or 0), _job_name(record, disk[-1]),
                          disk[-1].get("message")))
    if not found:
        return None
    _, job, message = max(found)
    return f"{job}: {message or 'no space left on device'}"


def final_outputs_missing(workdir: str | os.PathLike = ".", run: str = "demo") -> list[str]:
    """Return the run's final outputs not made yet by its latest statistics, for a line.

    ``movie.mp4`` (config outputs: movie) and ``cells.sql`` (table, written with the COPY
    file), each present, not marked incomplete and newer than ``stats.json``.
    """
    work = Path(workdir)
    out = work / "results" / run
    try:
        stats_json = out / "stats.json"
        wanted = json.loads(stats_json.read_text()).get("outputs") or OUTPUTS
        since = stats_json.stat().st_mtime
    except (OSError, ValueError):
        return ["stats.json"]
    names = [n for o, n in (("movie", "movie.mp4"), ("table", "cells.sql")) if o in wanted]
    missing = []
    for name in names:
        path = out / name
        if (not path.exists() or path.stat().st_mtime < since
                or marker_path(work, f"results/{run}/{name}").exists()):
            missing.append(name)
    return missing


def failed_job(workdir: str | os.PathLike = ".", run: str = "demo") -> str | None:
    """Return the line of `run`'s job that failed last, unless a job ended well after it.

    Reads every job's attempts record under ``logs/<run>/``
    (:mod:`ncreel.run.jobrecord`): a job whose newest attempt failed or was killed, but
    not stopped by a signal (an interrupted run, which the same command resumes). A job
    of the run that started after that failure and ended well (a later command of the
    run went on) makes it history; a job Snakemake no longer runs (its output taken out
    of the config) keeps its failure until then.

    Returns
    -------
    str or None
        The job (``load_database``, ``process_shard 00003``), its attempt and why, and
        its log; None when no such failure is the run's newest news.
    """
    failures, ok_starts = [], [0.0]
    for record, attempts in _job_attempts(workdir, run):
        last = attempts[-1]
        ok_starts += [float(a.get("start") or 0) for a in attempts if a["status"] == "ok"]
        # A stop (Ctrl-C, kill, qdel) is an interrupted run, not a failed one.
        if last["status"] in ("failed", "killed") and last.get("reason") not in (
                "interrupted", "not_retried"):
            why = last.get("message") or last.get("reason") or last["status"]
            log = record.relative_to(workdir).as_posix().removesuffix(".attempts.jsonl")
            failures.append((float(last.get("end") or last.get("start") or 0),
                             f"{_job_name(record, last)}, attempt {last.get('attempt')}: "
                             f"{why}; see {log}"))
    news = [f for f in failures if f[0] >= max(ok_starts)]
    return max(news)[1] if news else None


def main(argv: list[str] | None = None) -> int:
    """Print one line per shard and a summary; exit status 0 (1 if there is no plan)."""
    ap = argparse.ArgumentParser(prog="python -m ncreel.cluster.runstatus",
                                 description=__doc__.split("\n")[0])
    ap.add_argument("--run", default="demo", help="run name (config key run)")
    ap.add_argument("--workdir", default=".", help="where snakemake runs (default: .)")
    args = ap.parse_args(argv)
    try:
        rows = shard_status(args.workdir, args.run)
    except FileNotFoundError as err:
        print(f"ncreel: error: run '{args.run}' has no shard plan yet ({err.filename} "
              "missing): run the run's snakemake command once, or `snakemake --cores 1 "
              f"results/{args.run}/calibration.json --configfile YOUR_RUN_FILE` to plan only",
              file=sys.stderr)
        return 1
    except NcreelError as err:
        print(f"ncreel: error: {err}", file=sys.stderr)
        return 1
    # A run without a movie (config outputs) has steps, not frames.
    try:
        stats = json.loads((Path(args.workdir) / "results" / args.run / "stats.json")
                           .read_text())
        unit = "frames" if "movie" in (stats.get("outputs") or OUTPUTS) else "steps"
    except (OSError, ValueError):
        unit = "frames"
    print(f"{'shard':<7} {unit:>6}  {'state':<8} {'attempts':>8}  {'job id':<14} detail")
    for r in rows:
        print(f"{r['shard']:<7} {r['frames']:>6}  {r['state']:<8} {r['attempts']:>8}  "
              f"{r['jobid'] or '-':<14} {r['detail']}")
    counts = {s: sum(r["state"] == s for r in rows) for s in ("done", "running", "failed",
                                                               "interrupted", "to do")}
    plural = "s" if len(rows) != 1 else ""
    print(f"run {args.run}: {len(rows)} shard{plural}: "
          + ", ".join(f"{v} {k}" for k, v in counts.items()))
    holder = run_holder(args.workdir, args.run)
    lock = f"results/{args.run}/.ncreel-run.lock"
    if holder is not None:
        print(f"run {args.run}: running (Snakemake pid {holder or '?'} holds {lock})")
    elif (disk := disk_stop(args.workdir, args.run)) is not None:
        # Not "interrupted": the same command would stop again until there is room.
        print(f"run {args.run}: stopped on a full disk ({disk})")
    elif (failed := failed_job(args.workdir, args.run)) is not None:
        print(f"run {args.run}: failed ({failed}): fix it and run the same snakemake "
              "command again")
    elif counts["done"] == len(rows) and not (missing := final_outputs_missing(
            args.workdir, args.run)):
        print(f"run {args.run}: complete")
    elif counts["done"] == len(rows):
        print(f"run {args.run}: interrupted ({', '.join(missing)} not made yet): run the "
              "same snakemake command again to finish")
    else:
        print(f"run {args.run}: interrupted (no process holds {lock}): run the same "
              "snakemake command again to resume")
    return 0


if __name__ == "__main__":
    sys.exit(main())
