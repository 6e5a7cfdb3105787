"""No database password on disk, in logs or in the process list; names checked as whole strings.

The load job authenticates as a role whose pg_hba line requires scram-sha-256, so the run
can only succeed if libpq found the password in PGPASSFILE (outside the working tree).
The name checks on their own are in ``tests/test_configcheck.py``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from cells_data import write_risk_nc
from workflow_run import make_workdir

SECRET = "Zq7-ncreel-secret-9Xw"
ROLE = "ncreel_pw_role"


def _workdir(tmp_path: Path) -> Path:
    (tmp_path / "work").mkdir()
    return make_workdir(tmp_path / "work")


def _snakemake(work: Path, *args: str, env=None, **kw):
    return subprocess.run([sys.executable, "-m", "snakemake", "--cores", "2", *args], cwd=work,
                          capture_output=True, text=True, env=env, **kw)


def _error_lines(proc) -> list[str]:
    return [ln for ln in proc.stderr.splitlines() if ln.startswith("ncreel: error:")]


def _grep_tree(root: Path, needle: bytes) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file() and not p.is_symlink()
            and needle in p.read_bytes()]


@pytest.mark.integration
@pytest.mark.parametrize("how", ["configfile", "config_mapping", "config_string", "query",
                                 "keyword", "schema_error"])
def test_password_in_config_is_refused_and_never_echoed(how, tmp_path):
    work = _workdir(tmp_path)
    url = f"postgresql://bob:{SECRET}@db.example.org/climate"
    args: list[str] = ["-n"]
    user_file = tmp_path / "db.yaml"  # the user's own file, outside the working tree
    if how == "configfile":
        user_file.write_text(json.dumps({"database": {"url": url}}))
        args += ["--configfile", str(user_file)]
    elif how == "config_mapping":
        args += ["--config", f"database={{url: '{url}'}}"]
    elif how == "config_string":
        args += ["--config", f"database={url}"]
    elif how == "query":
        args += ["--config", "database={url: 'postgresql://db/x?password=" + SECRET + "'}"]
    elif how == "keyword":
        args += ["--config", f"database={{url: 'host=db password={SECRET}'}}"]
    else:  # a password-bearing value of the wrong type fails the schema, not check_database
        user_file.write_text(json.dumps({"database": {"url": [url]}}))
        args += ["--configfile", str(user_file)]
    proc = _snakemake(work, *args)
    lines = _error_lines(proc)
    assert proc.returncode != 0 and len(lines) == 1, proc.stderr[-2000:]
    assert "database" in lines[0]
    if how not in ("config_string", "schema_error"):
        assert "~/.pgpass" in lines[0] and "PGPASSWORD" in lines[0]
    assert SECRET not in proc.stderr and SECRET not in proc.stdout
    assert not _grep_tree(work, SECRET.encode())
    assert not (work / "results").exists()


@pytest.fixture
def password_role(pg_server, pg_conn):
    """A role that must authenticate with a password (scram) over the server's socket."""
    hba = Path(pg_conn.execute("SHOW hba_file").fetchone()[0])
    original = hba.read_text()
    pg_conn.execute(f"DROP ROLE IF EXISTS {ROLE}")
    pg_conn.execute(f"CREATE ROLE {ROLE} LOGIN PASSWORD '{SECRET}'")
    pg_conn.execute(f"GRANT CREATE ON SCHEMA public TO {ROLE}")
    hba.write_text(f"local all {ROLE} scram-sha-256\n" + original)
    pg_conn.execute("SELECT pg_reload_conf()")
    try:
        yield ROLE
    finally:
        hba.write_text(original)
        pg_conn.execute("SELECT pg_reload_conf()")


def _command_lines() -> str:
    """Every process's command line, as `ps -eo pid,args ww` shows it (read from /proc,
    where ps reads it: no procps needed)."""
    lines = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                args = (entry / "cmdline").read_bytes().replace(b"\0", b" ")
            except OSError:  # the process ended meanwhile
                continue
            lines.append(f"{entry.name} {args.decode(errors='replace')}")
    return "\n".join(lines)


def _sample_ps(stop: threading.Event, seen: list[str]) -> None:
    while not stop.is_set():
        seen.append(_command_lines())
        time.sleep(0.1)


@pytest.mark.integration
def test_password_never_on_disk_in_logs_or_ps_even_after_kill(tmp_path, pg_server, pg_conn,
                                                              password_role):
    import psycopg

    work = _workdir(tmp_path)
    nc = write_risk_nc(work / "risk.nc", n_time=4, ny=3, nx=4)
    secrets = tmp_path / "secrets"  # outside the working tree, as a user's ~/.pgpass is
    secrets.mkdir()
    pgpass = secrets / "pgpass"
    pgpass.write_text(f"*:*:*:{ROLE}:{SECRET}\n")
    pgpass.chmod(0o600)
    with psycopg.connect(f"host={pg_server['host']} dbname=postgres user={ROLE}",
                         passfile=str(pgpass)) as conn:  # the scram line is in force
        assert conn.execute("select current_user").fetchone()[0] == ROLE
    with pytest.raises(psycopg.OperationalError):
        psycopg.connect(f"host={pg_server['host']} dbname=postgres user={ROLE} "
                        "passfile=/nonexistent")
    cfg = {"input": str(nc), "variable": "tas", "run": "pw", "frames_per_shard": 4,
           "width": 64, "height": 48, "dpi": 20, "calibration_frames": 4,
           "table": "pw_cells",
           "database": {"url": f"postgresql:///postgres?host={pg_server['host']}&user={ROLE}"}}
    (work / "run.yaml").write_text(json.dumps(cfg))
    env = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
    env["PGPASSFILE"] = str(pgpass)
    cmd = [sys.executable, "-m", "snakemake", "--cores", "2", "--configfile", "run.yaml"]
    stop, seen = threading.Event(), []
    sampler = threading.Thread(target=_sample_ps, args=(stop, seen))
    sampler.start()
    try:
        # Killed with SIGKILL (no clean-up) once a job is running: its script file stays.
        with subprocess.Popen(cmd, cwd=work, env=env, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, start_new_session=True) as proc:
            deadline = time.time() + 120
            while time.time() < deadline and not list(
                    (work / ".snakemake/scripts").glob("tmp*.py")):
                time.sleep(0.05)
            os.killpg(proc.pid, signal.SIGKILL)
        left = list((work / ".snakemake/scripts").glob("tmp*.py"))
        assert left, "the kill should leave a job's script file behind"
        done = subprocess.run(cmd, cwd=work, env=env, capture_output=True, text=True)
    finally:
        stop.set()
        sampler.join()
    assert done.returncode == 0, done.stderr[-3000:]
    loaded = json.loads((work / "results/pw/load.json").read_text())
    assert loaded["rows"] == pg_conn.execute(
        "select count(*) from pw_cells where run = 'pw'").fetchone()[0] > 0
    assert not _grep_tree(work, SECRET.encode()), "the password is in the working tree"
    assert len(seen) > 5 and not [s for s in seen if SECRET in s], "the password is in ps"
    # The sampler saw the run itself (not only other processes).
    assert any("snakemake --cores 2 --configfile run.yaml" in s for s in seen)
    assert SECRET not in done.stderr and SECRET not in done.stdout


@pytest.mark.integration
@pytest.mark.parametrize("config, expected", [
    ({"run": "nl\n"}, "config key 'run'"),
    ({"run": "r" * 57}, "at most 56 characters"),
])
def test_names_checked_whole_before_any_job(config, expected, tmp_path):
    work = _workdir(tmp_path)
    (tmp_path / "names.yaml").write_text(json.dumps(config))
    proc = _snakemake(work, "-n", "--configfile", str(tmp_path / "names.yaml"))
    lines = _error_lines(proc)
    assert proc.returncode != 0 and len(lines) == 1, proc.stderr[-2000:]
    assert expected in lines[0]
    assert not (work / "results").exists()


SMALL_ODD = ["width=160", "height=96", "dpi=40", "preset=ultrafast", "frames_per_shard=4"]


#: Job scripts run by /bin/sh on this machine, as a batch system runs them: cluster-generic
#: with `sh` as its submit command (each job runs while it is "submitted").
SH_EXECUTOR = ["-j", "1", "--executor", "cluster-generic", "--cluster-generic-submit-cmd", "sh",
               "--seconds-between-status-checks", "1", "--latency-wait", "1"]


@pytest.mark.integration
@pytest.mark.parametrize("executor", [[], SH_EXECUTOR], ids=["local", "sh-jobscripts"])
def test_shell_metacharacters_and_braces_reach_local_jobs_unchanged(executor, tmp_path):
    """Every shell metacharacter and `{x}` in the table, the variable, the input path and
    the time units/calendar, given with ``--config``: the run succeeds, nothing is
    executed, and the jobs used exactly the checked names (the table in cells.sql, the
    variable, path, units and calendar in its note). Locally, and with every job run from
    Snakemake's job script by /bin/sh; on PBS and Slurm: test_pbs.py, test_slurm.py."""
    from odd_text import check_odd_run, config_args, write_odd_input

    work = _workdir(tmp_path)
    values = write_odd_input(work)
    proc = _snakemake(work, *executor, "--config", *SMALL_ODD, *config_args(values), "--",
                      "results/demo/cells.sql")
    assert proc.returncode == 0, proc.stderr[-3000:]
    check_odd_run(work, values)
    if not executor:  # the input's plain-named link does not make anything rerun
        again = _snakemake(work, "-n", "--config", *SMALL_ODD, *config_args(values), "--",
                           "results/demo/cells.sql")
        assert "Nothing to be done" in again.stdout + again.stderr, again.stderr[-2000:]


@pytest.mark.integration
@pytest.mark.parametrize("key", ["run", "table"])
def test_metacharacters_a_name_cannot_hold_are_refused_before_any_job(key, tmp_path):
    """`run` names directories (letters, digits, _ . -) and a table name holds no control
    character: shell text in one is one ``ncreel: error:`` line naming the key, before any
    job, and runs nothing."""
    from odd_text import payload

    work = _workdir(tmp_path)
    value = payload("r") if key == "run" else "t\x1b$(touch PWNED_t)"
    proc = _snakemake(work, "--config", f"{key}={value}")
    lines = _error_lines(proc)
    assert proc.returncode != 0 and len(lines) == 1, proc.stderr[-2000:]
    assert f"config key '{key}'" in lines[0]
    assert not list(tmp_path.rglob("PWNED*")) and not (work / "results").exists()


@pytest.mark.integration
def test_working_directory_a_job_command_would_change_is_refused_for_schedulers(tmp_path,
                                                                                sample_nc):
    """Snakemake writes the working directory and Snakefile paths into every scheduler
    job's shell command line (Slurm: inside ``--wrap="..."``): a `$` in them is one
    ``ncreel: error:`` line before anything is submitted; local runs are not affected."""
    (tmp_path / "w$(touch PWNED)").mkdir()
    work = make_workdir(tmp_path / "w$(touch PWNED)")
    (work / "resources").mkdir()
    (work / "resources" / "A1B_north_america.nc").symlink_to(sample_nc)
    proc = _snakemake(work, "-j", "1", "--executor", "cluster-generic",
                      "--cluster-generic-submit-cmd", "touch SUBMITTED", "--",
                      "results/demo/stats.json")
    lines = _error_lines(proc)
    assert proc.returncode != 0 and len(lines) == 1, proc.stderr[-2000:]
    assert "the working directory" in lines[0] and "'$'" in lines[0]
    assert not (work / "SUBMITTED").exists() and not list(tmp_path.rglob("PWNED*"))
    assert _snakemake(work, "-n", "--", "results/demo/stats.json").returncode == 0


@pytest.mark.integration
def test_envvars_value_an_export_would_change_is_refused_for_cluster_generic(tmp_path,
                                                                           sample_nc):
    """cluster-generic writes ``export VAR=repr(value)`` into every job's command: a
    ``--envvars`` value holding a quote is one line naming the variable (not its value),
    before anything is submitted."""
    work = _workdir(tmp_path)
    (work / "resources").mkdir()
    (work / "resources" / "A1B_north_america.nc").symlink_to(sample_nc)
    env = {**os.environ, "NCREEL_ODD": "it's $(touch PWNED)"}
    proc = _snakemake(work, "-j", "1", "--executor", "cluster-generic",
                      "--cluster-generic-submit-cmd", "touch SUBMITTED", "--envvars",
                      "NCREEL_ODD", "--", "results/demo/stats.json", env=env)
    lines = _error_lines(proc)
    assert proc.returncode != 0 and len(lines) == 1, proc.stderr[-2000:]
    assert "environment variable NCREEL_ODD (--envvars)" in lines[0]
    assert "touch" not in lines[0]
    assert not (work / "SUBMITTED").exists() and not list(tmp_path.rglob("PWNED*"))
