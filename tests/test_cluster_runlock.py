"""Stale Snakemake locks of a killed run are removed; live ones never are."""

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import xarray as xr
from ncreel.cluster.runlock import RECORD, clear_stale_lock

WORKFLOW = Path(__file__).resolve().parents[1] / "workflow"


def make_lock(tmp_path, pid, host=None):
    locks = tmp_path / ".snakemake" / "locks"
    locks.mkdir(parents=True)
    (locks / "0.input.lock").write_text("x")
    (tmp_path / ".snakemake" / RECORD).write_text(
        json.dumps({"host": host or socket.gethostname(), "pid": pid}))
    return locks


def dead_pid():
    p = subprocess.Popen(["true"])
    p.wait()
    return p.pid


def test_lock_of_dead_run_is_removed(tmp_path):
    locks = make_lock(tmp_path, dead_pid())
    assert clear_stale_lock(tmp_path)
    assert not list(locks.iterdir())


def test_lock_kept_while_a_job_of_the_killed_run_still_runs(tmp_path):
    # kill -9 of Snakemake leaves its script job running; resuming would run the same job
    # again, both writing the same .part files (seen: FileNotFoundError frames/00000.part).
    import sys

    from ncreel.core.errors import NcreelError

    locks = make_lock(tmp_path, dead_pid())
    scripts = tmp_path / ".snakemake" / "scripts"
    scripts.mkdir()
    job = scripts / "tmpabc.process_shard.py"
    job.write_text("import time; time.sleep(60)\n")
    proc = subprocess.Popen([sys.executable, str(job)], cwd=tmp_path)
    try:
        with pytest.raises(NcreelError, match=rf"still running .*pid {proc.pid}\)"):
            clear_stale_lock(tmp_path)
        assert list(locks.iterdir())
    finally:
        proc.kill()
        proc.wait()
    assert clear_stale_lock(tmp_path)


def test_job_under_a_live_snakemake_is_not_an_orphan(tmp_path):
    # Inside a PBS/Slurm job on this host the job's own snakemake runs the script; a rerun
    # after kill -9 of the main snakemake re-attaches to it and must not be refused.
    import os
    import sys
    import time

    locks = make_lock(tmp_path, dead_pid())
    scripts = tmp_path / ".snakemake" / "scripts"
    scripts.mkdir()
    job = scripts / "tmpabc.process_shard.py"
    job.write_text("import time; time.sleep(60)\n")
    fake = tmp_path / "snakemake"
    os.symlink(sys.executable, fake)
    proc = subprocess.Popen([str(fake), "-c", "import os, subprocess; subprocess.run("
                             "[os.environ['PY'], os.environ['JOB']])", "--nolock"], cwd=tmp_path,
                            env={**os.environ, "JOB": str(job), "PY": sys.executable},
                            start_new_session=True)
    try:
        time.sleep(0.5)
        assert clear_stale_lock(tmp_path)
        assert not list(locks.iterdir())
    finally:
        os.killpg(proc.pid, 9)
        proc.wait()


def test_lock_of_live_run_is_kept(tmp_path):
    with subprocess.Popen(["sleep", "30"]) as live:
        locks = make_lock(tmp_path, live.pid)
        assert not clear_stale_lock(tmp_path)
        assert list(locks.iterdir())
        live.kill()


def test_lock_from_another_host_is_kept(tmp_path):
    locks = make_lock(tmp_path, dead_pid(), host="some-other-login-node")
    assert not clear_stale_lock(tmp_path)
    assert list(locks.iterdir())


HOLD_RUN_LOCK = ("import sys, time; sys.path.insert(0, sys.argv[2]); "
                 "from ncreel.cluster.runlock import hold_run_lock; "
                 "hold_run_lock(sys.argv[1], 'r'); print('held', flush=True); time.sleep(60)")


def hold_elsewhere(lock: Path) -> subprocess.Popen:
    """A process holding `lock` as a run's Snakemake on another host would: by flock only
    (not a snakemake process of this host), so only the shared lock shows the run live."""
    holder = subprocess.Popen([sys.executable, "-c", HOLD_RUN_LOCK, str(lock), str(WORKFLOW)],
                              stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "held"
    return holder


def test_killed_run_beside_a_live_run_clears_only_its_own_lock(tmp_path, monkeypatch):
    """Run b was killed; run a is live in the same directory (its Snakemake on another
    host). Resuming b removes b's Snakemake lock files and keeps a's: before, every lock
    file went, and the resume cancelled a's scheduler jobs as the killed run's."""
    from ncreel.cluster.runlock import CLEARED_RUN, hold_run_lock, live_runs

    locks = make_lock(tmp_path, dead_pid())
    (locks / "0.input.lock").unlink()
    (locks / "0.output.lock").write_text("results/b/stats.json\nlogs/b/stats.log\n")
    (locks / "0.input.lock").write_text("resources/in.nc\nresults/b/stats.json\n")
    (locks / "1.output.lock").write_text("results/a/stats.json\nlogs/a/stats.log\n")
    (locks / "1.input.lock").write_text("resources/in.nc\nresults/a/stats.json\n")
    with hold_elsewhere(tmp_path / "results/a/.ncreel-run.lock") as a:
        try:
            monkeypatch.chdir(tmp_path)
            hold_run_lock("results/b/.ncreel-run.lock", "b")
            assert live_runs(tmp_path) == {"a": a.pid}  # not b, which this process holds
            assert clear_stale_lock(tmp_path, run_dirs=("results/b", "logs/b")) == CLEARED_RUN
            assert sorted(p.name for p in locks.iterdir()) == ["1.input.lock", "1.output.lock"]
        finally:
            a.kill()
    # a gone: a later killed run's lock is cleared whole again.
    (locks / "2.output.lock").write_text("results/c/x\n")
    (tmp_path / ".snakemake" / RECORD).write_text(
        json.dumps({"host": socket.gethostname(), "pid": dead_pid()}))
    assert clear_stale_lock(tmp_path, run_dirs=("results/b", "logs/b")) == "all"
    assert not list(locks.iterdir())


def test_killed_run_beside_the_recorded_live_run_clears_only_its_own_lock(tmp_path,
                                                                         monkeypatch):
    """Run a started first (the record names it) and is live on this host; run b beside
    it was killed with SIGKILL. b's same command removes b's lock files only; before, it
    removed none, and Snakemake refused b with "Directory cannot be locked" until
    ``--unlock``, which removes a's too."""
    from ncreel.cluster.runlock import CLEARED_RUN, hold_run_lock

    with subprocess.Popen(["sleep", "30"]) as a:  # the recorded run's Snakemake
        locks = make_lock(tmp_path, a.pid)
        (locks / "0.input.lock").write_text("resources/in.nc\nresults/a/stats.json\n")
        (locks / "0.output.lock").write_text("results/a/stats.json\n")
        (locks / "1.input.lock").write_text("resources/in.nc\nresults/b/stats.json\n")
        (locks / "1.output.lock").write_text("results/b/stats.json\nlogs/b/stats.log\n")
        monkeypatch.chdir(tmp_path)
        hold_run_lock("results/b/.ncreel-run.lock", "b")
        assert clear_stale_lock(tmp_path, run_dirs=("results/b", "logs/b")) == CLEARED_RUN
        assert sorted(p.name for p in locks.iterdir()) == ["0.input.lock", "0.output.lock"]
        assert json.loads((tmp_path / ".snakemake" / RECORD).read_text())["pid"] == a.pid
        # Without this run's directories (no run lock held) nothing is touched.
        (locks / "1.output.lock").write_text("results/b/stats.json\n")
        assert not clear_stale_lock(tmp_path)
        assert len(list(locks.iterdir())) == 3
        a.kill()


def test_run_lock_is_exclusive_and_released_by_sigkill(tmp_path):
    from ncreel.cluster.runlock import hold_run_lock
    from ncreel.core.errors import NcreelError

    lock = tmp_path / "results/r/.ncreel-run.lock"
    code = ("import sys, time; sys.path.insert(0, sys.argv[2]); "
            "from ncreel.cluster.runlock import hold_run_lock; hold_run_lock(sys.argv[1], 'r'); "
            "print('held', flush=True); time.sleep(60)")
    with subprocess.Popen([sys.executable, "-c", code, str(lock), str(WORKFLOW)],
                          stdout=subprocess.PIPE, text=True) as holder:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(NcreelError, match=rf"run 'r' is already running .*pid {holder.pid}"):
            hold_run_lock(lock, "r")
        holder.kill()  # SIGKILL: no clean-up, the kernel drops the flock
    hold_run_lock(lock, "r")
    hold_run_lock(lock, "r")  # this process holds it already


@pytest.mark.integration
def test_same_run_refused_after_another_run_removed_snakemake_locks(tmp_path, sample_nc):
    """P runs; Q finishes in the same directory (Snakemake removes all locks); P again: refused."""
    from workflow_run import SMALL, make_workdir, snakemake

    work = make_workdir(tmp_path)
    with xr.open_dataset(sample_nc, decode_times=False) as ds:
        ds.isel(time=slice(0, 6), latitude=slice(0, 8), longitude=slice(0, 10)).to_netcdf(
            work / "small.nc")
    common = ["--config", "input=small.nc", *SMALL, "frames_per_shard=3",
              "calibration_frames=2"]
    cmd_p = [sys.executable, "-m", "snakemake", "--cores", "1", *common, "run=p"]
    with subprocess.Popen(cmd_p, cwd=work, stdout=subprocess.DEVNULL,
                          stderr=subprocess.DEVNULL, start_new_session=True) as p:
        try:
            deadline = time.time() + 120
            while time.time() < deadline and not list((work / ".snakemake/locks").glob("*")):
                time.sleep(0.1)
            assert list((work / ".snakemake/locks").glob("*")), "P should be running"
            os.killpg(p.pid, signal.SIGSTOP)  # P stays alive, holding its locks
            # Any finished run removes .snakemake/locks; one job is enough to show it.
            snakemake(work, "results/q/stats.json", *common, "run=q")
            assert not list((work / ".snakemake/locks").glob("*"))
            again = subprocess.run(cmd_p, cwd=work, capture_output=True, text=True)
            lines = [ln for ln in again.stderr.splitlines() if ln.startswith("ncreel: error:")]
            assert again.returncode != 0 and len(lines) == 1, again.stderr[-3000:]
            assert f"run 'p' is already running in this directory (pid {p.pid}" in lines[0]
        finally:
            os.killpg(p.pid, signal.SIGKILL)
            os.killpg(p.pid, signal.SIGCONT)
    # P died by SIGKILL: the kernel released its flock, so its command is accepted again.
    assert "ncreel: error" not in snakemake(work, "-n", *common, "run=p").stderr


def test_batch_jobscripts_are_not_snakemake_runs():
    from ncreel.cluster.runlock import _runs_snakemake

    def argv(cmd):
        return [a.encode() for a in cmd.split()]

    assert _runs_snakemake(argv("/venv/bin/python3 -m snakemake --profile profiles/cheyenne"))
    assert _runs_snakemake(argv("/venv/bin/snakemake -n"))
    # A PBS job of the killed run: its shell runs the jobscript with cwd = the workdir.
    assert not _runs_snakemake(argv("/bin/sh /w/.snakemake/tmp.x1/snakejob.process_shard.3.sh"))
    assert not _runs_snakemake(argv("python3 workflow/scripts/ncreel_pbs.py status 7.vm"))


def _bad_place(tmp_path: Path, case: str) -> tuple[Path, dict]:
    """Make the bad place `case` in `tmp_path`; return the lock path and the places."""
    results, logs = tmp_path / "results", tmp_path / "logs"
    if case == "results is a file":
        results.write_text("")
    elif case == "results/run is a file":
        results.mkdir()
        (results / "run").write_text("")
    elif case == "results/run is a dangling link":
        results.mkdir()
        (results / "run").symlink_to(tmp_path / "gone")
    elif case == "logs/run is a file":
        logs.mkdir()
        (logs / "run").write_text("")
    elif case == "logs is a dangling link":
        logs.symlink_to(tmp_path / "gone")
    return results / "run" / ".ncreel-run.lock", {str(logs / "run"): "log directory"}


@pytest.mark.parametrize("case, place, said", [
    ("results is a file", "results", "output directory '{}' is a file, not a directory: "
     "move it away (ncreel writes there)"),
    ("results/run is a file", "results/run", "output directory '{}' is a file, not a "
     "directory: move it away (ncreel writes there), or choose another run name (run=NAME)"),
    ("results/run is a dangling link", "results/run", "output directory '{}' is a symbolic "
     "link to '{gone}', which does not exist: create that directory, or remove the link"),
    ("logs/run is a file", "logs/run", "log directory '{}' is a file, not a directory"),
    ("logs is a dangling link", "logs", "log directory '{}' is a symbolic link to '{gone}'"),
])
def test_bad_place_for_the_run_lock_or_outputs_is_one_line(tmp_path, case, place, said):
    """results/, results/<run>, logs/<run> that are files or dangling links: one line
    naming the path and what to do (was FileExistsError at common.smk)."""
    from ncreel.cluster.runlock import hold_run_lock
    from ncreel.core.errors import NcreelError

    lock, places = _bad_place(tmp_path, case)
    with pytest.raises(NcreelError) as err:
        hold_run_lock(lock, "run", places=places)
    assert str(err.value).startswith(said.format(tmp_path / place, gone=tmp_path / "gone"))
    assert "\n" not in str(err.value)


def _mount_tmpfs(where: Path, *options: str) -> None:
    where.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", ",".join(["size=64k", *options]), "tmpfs",
                    str(where)], check=True)


needs_root = pytest.mark.skipif(
    os.geteuid() != 0, reason="mounts a small tmpfs (a full or read-only file system), "
    "which needs root")


@needs_root
@pytest.mark.parametrize("which", ["results", "logs"])
def test_full_file_system_when_the_run_lock_is_taken_is_one_line(tmp_path, which):
    """results/ or logs/ on a full file system: one line naming it (was OSError ENOSPC, or
    no error at all until a job wrote there: a full disk still creates empty files)."""
    from ncreel.cluster.runlock import hold_run_lock
    from ncreel.core.errors import NcreelError

    mnt = tmp_path / "mnt"
    _mount_tmpfs(mnt)
    try:
        with open(mnt / "fill", "wb", buffering=0) as fh, pytest.raises(OSError):
            while True:
                fh.write(b"\0" * 4096)
        (tmp_path / which).symlink_to(mnt)
        lock = tmp_path / "results" / "run" / ".ncreel-run.lock"
        with pytest.raises(NcreelError) as err:
            hold_run_lock(lock, "run", places={str(tmp_path / "logs" / "run"): "log directory"})
        kind = "output" if which == "results" else "log"
        assert str(err.value) == (
            f"{kind} directory '{tmp_path / which / 'run'}' is on a full file system (or over "
            "its quota): free space there, or run in a working directory on another file "
            "system")
    finally:
        subprocess.run(["umount", str(mnt)], check=True)


def test_read_only_place_is_one_line(tmp_path):
    """A results/ that cannot be written: one line naming it — a read-only file system
    (as root, who may write any directory), or a directory without write permission."""
    from ncreel.cluster.runlock import hold_run_lock
    from ncreel.core.errors import NcreelError

    results = tmp_path / "results"
    if os.geteuid() == 0:
        _mount_tmpfs(results, "ro")
        said = "is on a read-only file system: run in a working directory on a writable"
    else:
        results.mkdir(mode=0o555)
        said = "cannot be written (permission denied): make it writable (chmod u+w)"
    try:
        with pytest.raises(NcreelError) as err:
            hold_run_lock(results / "run" / ".ncreel-run.lock", "run")
        assert str(err.value).startswith(f"output directory '{results}")
        assert said in str(err.value)
    finally:
        if os.geteuid() == 0:
            subprocess.run(["umount", str(results)], check=True)
        else:
            results.chmod(0o755)
