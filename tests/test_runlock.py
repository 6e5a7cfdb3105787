"""Stale Snakemake locks of a killed run are removed; live ones never are."""

import json
import socket
import subprocess

from ncreel.runlock import RECORD, clear_stale_lock


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


def test_batch_jobscripts_are_not_snakemake_runs():
    from ncreel.runlock import _runs_snakemake

    def argv(cmd):
        return [a.encode() for a in cmd.split()]

    assert _runs_snakemake(argv("/venv/bin/python3 -m snakemake --profile profiles/cheyenne"))
    assert _runs_snakemake(argv("/venv/bin/snakemake -n"))
    # A PBS job of the killed run: its shell runs the jobscript with cwd = the workdir.
    assert not _runs_snakemake(argv("/bin/sh /w/.snakemake/tmp.x1/snakejob.render_shard.3.sh"))
    assert not _runs_snakemake(argv("python3 workflow/scripts/ncreel_pbs.py status 7.vm"))
