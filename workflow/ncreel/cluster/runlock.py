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

from ncreel.core.errors import NcreelError
from ncreel.run.jobrecord import scheduler_job_id

log = logging.getLogger(__name__)

RECORD = "ncreel-run.json"
#: What :func:`clear_stale_lock` removed: nothing, every lock file (no other run is live
#: here: every scheduler job of this directory is the killed run's), or only the lock
#: files naming this run's paths (another run is live here: its jobs are not touched).
CLEARED_NONE, CLEARED_ALL, CLEARED_RUN = "", "all", "run"
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


def live_runs(workdir: str | os.PathLike = ".") -> dict[str, int]:
    """Return the runs in `workdir` whose run lock a live process other than this holds.

    The run lock is an ``flock`` (:func:`hold_run_lock`), which a shared file system that
    supports it (GPFS, NFSv4, Lustre's ``flock`` mount) shows to every host: a run whose
    Snakemake works on another host (a controller batch job beside a login-node run) is
    found, where :func:`_other_snakemake_here` sees only this host's processes.

    Parameters
    ----------
    workdir : path
        The Snakemake working directory (holds ``results/<run>/.ncreel-run.lock``).

    Returns
    -------
    dict of str to int
        Run name to the holder's pid (0 if unreadable).
    """
    found = {}
    for lock in sorted(Path(workdir, "results").glob("*/.ncreel-run.lock")):
        if os.path.abspath(lock) in _HELD:
            continue  # this process's own run
        try:
            holder = run_lock_holder(lock)
        except OSError:
            continue  # no flock here: nobody can tell
        if holder is not None:
            found[lock.parent.name] = holder
    return found


def _names_run_paths(lock_file: Path, run_dirs: tuple[str, ...]) -> bool:
    try:
        keys = [k.strip() for k in lock_file.read_text().splitlines() if k.strip()]
    except OSError:
        return False
    return any(os.path.normpath(k) == d or os.path.normpath(k).startswith(d + os.sep)
               for k in keys for d in run_dirs)


def clear_stale_lock(workdir: str | os.PathLike = ".", run_dirs=(), job_ended=None) -> str:
    """Remove Snakemake's lock files left by a killed run in `workdir`, then record this run.

    When another run is live in `workdir` (a Snakemake on this host, or a run lock held
    from any host, :func:`live_runs`), its lock files stay: only those naming a path under
    `run_dirs` are removed. The caller must hold the run lock of the run owning
    `run_dirs` (:func:`hold_run_lock`), so no live process writes there.

    Parameters
    ----------
    workdir : path
        The Snakemake working directory (holds ``.snakemake/``).
    run_dirs : sequence of str
        This run's directories as Snakemake names its paths (``results/<run>``,
        ``logs/<run>``, relative to `workdir`).
    job_ended : callable, optional
        ``(scheduler, jobid) -> bool``: whether a batch job has ended for sure (default
        :func:`ncreel.cluster.schedulers.batch_job_ended`). A run recorded on another host
        is dead when it ran inside a batch job that has ended (a controller job deleted
        with ``qdel`` or ended by its walltime is killed with SIGKILL after a few seconds,
        and the next one runs on another node).

    Returns
    -------
    str
        :data:`CLEARED_ALL` (every lock file: no other run is live, so every scheduler
        job of `workdir` is the killed run's), :data:`CLEARED_RUN` (only this run's lock
        files: leave the other runs' jobs alone) or :data:`CLEARED_NONE` (false).

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
    removed = CLEARED_NONE
    lock_files = list(locks.glob("*.lock")) if locks.is_dir() else []
    prev_pid = int(previous.get("pid", 0) or 0)
    prev_alive = previous.get("host") == host and prev_pid and _alive(prev_pid)
    run_dirs = tuple(os.path.normpath(d) for d in run_dirs)
    known = previous.get("host", host) == host
    if lock_files and not known and previous.get("jobid"):
        if job_ended is None:
            from ncreel.cluster.schedulers import batch_job_ended as job_ended
        known = job_ended(previous.get("scheduler"), str(previous["jobid"]))
    # The record names the first of the runs live here; a run killed beside it left lock
    # files too, which only their paths tell apart.
    if lock_files and known and (run_dirs or not prev_alive):
        others = _other_snakemake_here(workdir, _ancestors())
        elsewhere = live_runs(workdir)
        orphans = _job_processes_here(workdir, _ancestors())
        killed = "unknown" if prev_alive else prev_pid or "unknown"  # the record's run lives
        if orphans:
            pids = ", ".join(map(str, sorted(orphans)[:5]))
            raise NcreelError(f"a job of the killed run (pid {killed}) is still "
                              f"running in {workdir} (pid {pids}): wait for it to end, or "
                              f"stop it (kill {pids}), then run the same command again")
        if not others and not elsewhere and not prev_alive:
            for f in lock_files:
                f.unlink(missing_ok=True)
            removed = CLEARED_ALL
            log.warning("removed the stale Snakemake lock of a killed run (pid %s) in %s",
                        killed, workdir)
        elif run_dirs:
            # The live runs' lock files name only their own paths; those naming ours are
            # the killed run's (this process holds our run lock).
            mine = [f for f in lock_files if _names_run_paths(f, run_dirs)]
            for f in mine:
                f.unlink(missing_ok=True)
            if mine:
                removed = CLEARED_RUN
                log.warning("removed the stale Snakemake lock of a killed run (pid %s) in "
                            "%s; kept those of the runs still live here (%s)", killed, workdir,
                            ", ".join(sorted(elsewhere))
                            or f"pid {(others or [prev_pid])[0]}")
    # A record of a run not known dead stays: overwritten by a command that ran beside it
    # on another host, it would name that command's ended process, and the next run here
    # would take the live run's lock for stale.
    if not lock_files or (known and not prev_alive):
        meta.mkdir(parents=True, exist_ok=True)
        tmp = record.with_suffix(".tmp")
        scheduler, jobid = scheduler_job_id()  # a controller batch job's own id
        tmp.write_text(json.dumps({"host": host, "pid": os.getpid(),
                                   "scheduler": scheduler, "jobid": jobid}))
        os.replace(tmp, record)
    return removed


def _place_line(place: str, what: str, problem: str, todo: str) -> NcreelError:
    return NcreelError(f"{what} '{place}' {problem}: {todo}")


def _os_problem(err: OSError) -> tuple[str, str]:
    """``(problem, what to do)`` for an OSError met creating or writing a place."""
    import errno

    if err.errno in (errno.ENOSPC, errno.EDQUOT):
        return ("is on a full file system (or over its quota)",
                "free space there, or run in a working directory on another file system")
    if err.errno == errno.EROFS:
        return ("is on a read-only file system",
                "run in a working directory on a writable file system")
    if err.errno in (errno.EACCES, errno.EPERM):
        return ("cannot be written (" + (err.strerror or "permission denied").lower() + ")",
                "make it writable (chmod u+w), or run in a working directory you can write")
    return (f"cannot be created or written ({err.strerror})",
            "fix or remove it, or run in another working directory")


def check_place(directory: str | os.PathLike, what: str, *, probe: bool = True) -> None:
    """Make sure `directory` is (or can be made) a writable directory, or say why not.

    Every part of the path is looked at from the working directory down: a file where a
    directory must be, a dangling symbolic link, a directory that cannot be written, a
    full file system. `directory` is created if missing and, with `probe`, a few bytes are
    written there and removed (a full file system still creates empty files).

    Parameters
    ----------
    directory : path
        E.g. ``results/<run>`` or ``logs/<run>`` (relative to the working directory).
    what : str
        What it holds, for the message (``the run's outputs``, ``the run's logs``).
    probe : bool
        Write and remove a small file to find a full file system.

    Raises
    ------
    NcreelError
        One line naming the path, what is wrong with it, and what to do.
    """
    import errno
    import stat
    import tempfile

    directory = os.path.normpath(os.fspath(directory))
    parts = directory.split(os.sep)
    for i in range(1, len(parts) + 1):
        place = os.sep.join(parts[:i]) or os.sep
        try:
            st = os.stat(place)
        except FileNotFoundError:
            if os.path.islink(place):
                raise _place_line(place, what, f"is a symbolic link to "
                                  f"'{os.readlink(place)}', which does not exist",
                                  "create that directory, or remove the link") from None
            break  # created below
        except OSError as err:
            raise _place_line(place, what, *_os_problem(err)) from None
        if not stat.S_ISDIR(st.st_mode):
            raise _place_line(place, what, "is a file, not a directory",
                              "move it away (ncreel writes there)"
                              + (", or choose another run name (run=NAME)"
                                 if i == len(parts) else ""))
    try:
        os.makedirs(directory, exist_ok=True)
        if os.statvfs(directory).f_flag & os.ST_RDONLY:
            raise OSError(errno.EROFS, "Read-only file system", directory)
        if not os.access(directory, os.W_OK | os.X_OK):
            raise PermissionError(errno.EACCES, "Permission denied", directory)
        if probe:
            fd, name = tempfile.mkstemp(dir=directory, prefix=".ncreel-probe-")
            try:
                os.write(fd, b"\0" * 4096)
                os.fsync(fd)
            finally:
                os.close(fd)
                os.unlink(name)
    except OSError as err:
        failed = os.path.normpath(err.filename) if isinstance(err.filename, str) else None
        place = directory
        if failed and not failed.startswith(os.path.join(directory, ".ncreel-probe-")):
            place = failed  # the part that could not be created
        raise _place_line(place, what, *_os_problem(err)) from None


def hold_run_lock(path: str | os.PathLike, run: str,
                  places: dict[str, str] | None = None) -> None:
    """Take the run's exclusive lock for the rest of this process's life.

    The lock's directory (``results/<run>``) and every directory of `places` are first
    checked with :func:`check_place`, so that a bad place stops the run with one line
    before any job.

    Parameters
    ----------
    path : path
        The lock file (``results/<run>/.ncreel-run.lock``); created with its directory.
    run : str
        The run's name, for the message.
    places : dict of str to str, optional
        Further directories the run writes (``{"logs/<run>": "log directory"}``).

    Raises
    ------
    NcreelError
        A place is not a writable directory (a file, a dangling link, read-only, a full
        file system), or another live process holds the lock; the message names the path
        or the holder's pid.
    """
    given, path = os.fspath(path), os.path.abspath(path)
    if path in _HELD:
        return
    check_place(os.path.dirname(given) or ".", "output directory")
    for place, what in (places or {}).items():
        check_place(place, what)
    # Not inherited by jobs (PEP 446): the lock lives exactly as long as this process.
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as err:
        raise _place_line(os.path.relpath(path), "run lock", *_os_problem(err)) from None
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
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    except OSError as err:
        os.close(fd)
        raise _place_line(os.path.relpath(path), "run lock", *_os_problem(err)) from None
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
