"""Let a killed run be resumed by running the same command again.

Snakemake locks the working directory (``.snakemake/locks/``) for the duration of a run
and removes the lock on exit. A run killed with SIGKILL (or by a login node's session
limit) leaves the lock behind, and the next run stops with "Directory cannot be locked"
until the user runs ``--unlock``. This module removes such a lock only when it is
certainly stale: the run that recorded itself in ``.snakemake/ncreel-run.json`` was on
this host and is dead, and no other snakemake process on this host works in this
directory. A lock held from another host (shared file system) is never touched.

Snakemake's locks do not keep one run from running twice: a run that finishes removes
the whole ``.snakemake/locks/``, other runs' locks included. :func:`hold_run_lock` takes
a lock of ncreel's own per run, an ``flock`` on ``results/<run>/.ncreel-run.lock`` held
by the snakemake process until it exits; the kernel releases it when that process dies,
even by SIGKILL, so it is never stale.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import socket
import time
from pathlib import Path

from ncreel.errors import NcreelError

log = logging.getLogger(__name__)

RECORD = "ncreel-run.json"
#: Open lock files of this process, by path: kept open, so their flock stays held.
_HELD: dict[str, int] = {}


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _runs_snakemake(argv: list[bytes]) -> bool:
    """Whether `argv` runs Snakemake itself (``snakemake``, ``python -m snakemake``).

    A path under ``.snakemake/`` (a batch job's jobscript, running in the working
    directory) is not Snakemake and holds no lock.
    """
    names = [os.path.basename(a) for a in argv[:3]]
    main_py = b"__main__.py" in names and any(b"/snakemake/" in a for a in argv[:3])
    dash_m = any(a == b"-m" and b == b"snakemake" for a, b in zip(argv, argv[1:4], strict=False))
    return b"snakemake" in names or main_py or dash_m


def _processes_in(workdir: Path, own: set[int]):
    """``(pid, argv, proc_dir)`` of this host's processes whose cwd is `workdir`, not `own`."""
    for entry in Path("/proc").iterdir() if Path("/proc").is_dir() else []:
        if not entry.name.isdigit() or int(entry.name) in own:
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
            if Path(os.readlink(entry / "cwd")) == workdir:
                yield int(entry.name), argv, entry
        except OSError:
            continue


def _other_snakemake_here(workdir: Path, own: set[int]) -> list[int]:
    """PIDs of other snakemake processes on this host whose cwd is `workdir`."""
    # Job subprocesses run with --nolock and hold no lock.
    return [pid for pid, argv, _ in _processes_in(workdir, own)
            if _runs_snakemake(argv) and b"--nolock" not in argv]


def _job_processes_here(workdir: Path, own: set[int]) -> list[int]:
    """PIDs of Snakemake job processes on this host working in `workdir`.

    A ``script:`` job runs ``python <workdir>/.snakemake/scripts/tmp*.<rule>.py``; killing
    Snakemake with SIGKILL leaves it running (it is not in Snakemake's process group's
    signal path), still writing the outputs a resumed run would write again.

    Only orphans count: a job whose parent is a live snakemake (the job's own one inside a
    PBS/Slurm job on this host, which a rerun re-attaches to) is not the killed run's.
    """
    found = []
    for pid, argv, entry in _processes_in(workdir, own):
        if _runs_snakemake(argv) or not any(b".snakemake/scripts/" in a for a in argv[:4]):
            continue
        try:
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue  # it has ended
        try:
            parent = Path(f"/proc/{ppid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            parent = []  # the parent has ended: an orphan
        if not _runs_snakemake(parent):
            found.append(pid)
    return found


def _ancestors() -> set[int]:
    pids, pid = {os.getpid()}, os.getpid()
    while pid > 1:
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            break
        pid = int(stat.rsplit(")", 1)[1].split()[1])
        pids.add(pid)
    return pids


def clear_stale_lock(workdir: str | os.PathLike = ".") -> bool:
    """Remove Snakemake's lock files left by a killed run in `workdir`, then record this run.

    Parameters
    ----------
    workdir : path
        The Snakemake working directory (holds ``.snakemake/``).

    Returns
    -------
    bool
        True if stale lock files were removed.

    Raises
    ------
    NcreelError
        When the killed run's lock would be removed but a job process of it (an orphan
        that SIGKILL of Snakemake left running) still works in `workdir`: a resumed run
        would run that job again, both writing the same files.
    """
    workdir = Path(workdir).resolve()
    meta = workdir / ".snakemake"
    locks = meta / "locks"
    record = meta / RECORD
    host = socket.gethostname()
    previous = {}
    if record.is_file():
        try:
            previous = json.loads(record.read_text())
        except (OSError, ValueError):
            previous = {}
    removed = False
    lock_files = list(locks.glob("*.lock")) if locks.is_dir() else []
    prev_pid = int(previous.get("pid", 0) or 0)
    prev_alive = previous.get("host") == host and prev_pid and _alive(prev_pid)
    if lock_files and previous.get("host", host) == host and not prev_alive:
        others = _other_snakemake_here(workdir, _ancestors())
        orphans = [] if others else _job_processes_here(workdir, _ancestors())
        if orphans:
            pids = ", ".join(map(str, sorted(orphans)[:5]))
            raise NcreelError(f"a job of the killed run (pid {prev_pid or 'unknown'}) is still "
                              f"running in {workdir} (pid {pids}): wait for it to end, or "
                              f"stop it (kill {pids}), then run the same command again")
        if not others:
            for f in lock_files:
                f.unlink(missing_ok=True)
            removed = True
            log.warning("removed the stale Snakemake lock of a killed run (pid %s) in %s",
                        prev_pid or "unknown", workdir)
    if not prev_alive:
        meta.mkdir(parents=True, exist_ok=True)
        tmp = record.with_suffix(".tmp")
        tmp.write_text(json.dumps({"host": host, "pid": os.getpid()}))
        os.replace(tmp, record)
    return removed


def hold_run_lock(path: str | os.PathLike, run: str) -> None:
    """Take the run's exclusive lock for the rest of this process's life.

    Parameters
    ----------
    path : path
        The lock file (``results/<run>/.ncreel-run.lock``); created with its directory.
    run : str
        The run's name, for the message.

    Raises
    ------
    NcreelError
        Another live process holds the lock; the message names its pid.
    """
    from ncreel.errors import NcreelError

    path = os.path.abspath(path)
    if path in _HELD:
        return
    os.makedirs(os.path.dirname(path), exist_ok=True)
    # Not inherited by jobs (PEP 446): the lock lives exactly as long as this process.
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    for wait in (0.05, 0.2, None):
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            break
        except BlockingIOError:
            if wait is not None:  # a status probe (run_lock_holder) holds it for microseconds
                time.sleep(wait)
    else:
        holder = os.read(fd, 64).decode(errors="replace").strip() or "unknown"
        os.close(fd)
        raise NcreelError(f"run '{run}' is already running in this directory (pid {holder} "
                          f"holds {os.path.relpath(path)}): wait for it to finish or stop "
                          "it, then run the same command again") from None
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    _HELD[path] = fd


def run_lock_holder(path: str | os.PathLike) -> int | None:
    """Who holds the run's lock taken by :func:`hold_run_lock`, without waiting for it.

    A shared ``flock`` is tried and at once released: it fails exactly while a live
    process holds the exclusive lock (the kernel drops it when that process ends, by
    SIGKILL or SIGHUP too). Reads the lock file; takes nothing for longer than the probe.

    Parameters
    ----------
    path : path
        The lock file (``results/<run>/.ncreel-run.lock``).

    Returns
    -------
    int or None
        The holder's pid as it wrote it (0 if unreadable) while the lock is held; None
        when no process holds it or the file does not exist.

    Raises
    ------
    OSError
        The file system does not support ``flock`` (then nobody can tell).
    """
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            text = os.pread(fd, 64, 0).decode(errors="replace").strip()
            return int(text) if text.isdigit() else 0
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)
