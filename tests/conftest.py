"""Shared fixtures: the package on sys.path, the real sample file, a real PostgreSQL server."""

from __future__ import annotations

import json
import logging
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: The PBS Pro executor plugin's own distribution (``make venv`` installs it editable).
PLUGIN = ROOT / "workflow" / "executor-plugin-pbs-pro"
sys.path[:0] = [str(ROOT / "workflow"), str(PLUGIN)]
# Snakemake started by tests finds this checkout's ncreel and PBS Pro executor plugin
# here first, as `make venv`'s editable installs make them findable.
os.environ["PYTHONPATH"] = os.pathsep.join(
    [str(ROOT / "workflow"), str(PLUGIN), *filter(None, [os.environ.get("PYTHONPATH")])])


def _text(stream) -> str:
    if stream is None:
        return "(not captured)"
    return stream.decode(errors="replace") if isinstance(stream, bytes) else str(stream)


def program_failure_text(err: subprocess.CalledProcessError, limit: int = 6000) -> str:
    """What a failed external program said: its command, exit status, stderr and stdout."""
    cmd = err.cmd if isinstance(err.cmd, str) else shlex.join(map(str, err.cmd))
    return (f"$ {cmd}\nexit status {err.returncode}\n"
            f"--- stderr ---\n{_text(err.stderr)[-limit:]}\n"
            f"--- stdout ---\n{_text(err.stdout)[-limit:]}")


#: System programs the tests run, and the Debian package that has each (`make sysdeps`
#: installs them as root). A test that needs one that is not on PATH is skipped, not failed:
#: a user without root cannot install it.
SYSTEM_PROGRAMS = {"ffprobe": "ffmpeg", "ffmpeg": "ffmpeg", "dot": "graphviz",
                   "psql": "postgresql-client", "zstd": "zstd", "initdb": "postgresql",
                   "pg_ctl": "postgresql", "chromium": "chromium"}


def missing_program_reason(name: str) -> str:
    """Skip reason for a test that needs the system program ``name``, which is not installed."""
    return (f"needs {name} (Debian package {SYSTEM_PROGRAMS.get(name, name)}), not installed: "
            "as root `make sysdeps` installs it")


def have_program(name: str) -> bool:
    """Whether the system program ``name`` is installed (PostgreSQL's server programs are
    looked for where Debian puts them, as :func:`pgserver.pg_bin` does)."""
    if name in ("initdb", "pg_ctl"):
        from pgserver import pg_bin

        try:
            pg_bin(name)
        except RuntimeError:
            return False
        return True
    return shutil.which(name) is not None


def needs_programs(*names: str):
    """Mark: skip the test (with the reason) unless every system program in `names` is
    installed; for tests that run one in a child process, where no FileNotFoundError
    reaches pytest."""
    missing = [n for n in names if not have_program(n)]
    return pytest.mark.skipif(bool(missing), reason="; ".join(map(missing_program_reason,
                                                                   missing)))


def run_bench(script: str, *args: str, timeout: float = 900) -> dict[str, str]:
    """Run ``bench/<script>`` with `args` in this Python; return its ``key=value`` lines.

    The benchmark's smoke tests: a non-zero exit fails with the end of its stderr.
    """
    proc = subprocess.run([sys.executable, str(ROOT / "bench" / script), *args],
                          capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return dict(line.split("=", 1) for line in proc.stdout.splitlines()
                if "=" in line and not line.startswith("#"))


#: Seconds each test took in a whole run (``make durations`` writes it): the suite starts
#: with the longest, so that pytest-xdist's workers end together.
DURATIONS = ROOT / "tests" / "durations.json"
#: Marks of a scheduler's tests: each scheduler's run one at a time on one worker (the
#: mark names their group).
SCHEDULER_MARKS = ("pbs", "slurm")
#: Fixtures that change what one shared scheduler offers every job (the PBS vnode's size):
#: their tests run one at a time, with the other PBS tests.
SCHEDULER_STATE = {"derecho_sized_node": "pbs", "two_derecho_nodes": "pbs"}
#: Tests that depend on that state: a job PBS can never run on the node as it is, jobs
#: that must still be queued or running when the test kills its run (on a node resized to
#: 128 cores they all run at once and end).
SCHEDULER_STATE_TESTS = dict.fromkeys([
    "tests/integration/test_pbs.py::test_status_command_on_real_job_endings",
    "tests/integration/test_pbs.py::test_kill_snakemake_and_resume_on_pbs",
    "tests/integration/test_pbs_arrays.py::test_kill_and_resume_with_array_in_flight",
    "tests/integration/test_pbs_arrays.py::"
    "test_queued_sub_jobs_of_a_deleted_array_are_deleted_not_failed"], "pbs")


def _guess_seconds(item) -> float:
    # A test not yet in DURATIONS: a workflow run or a scheduler's job, or a unit test.
    slow = any(item.get_closest_marker(m) for m in ("integration", "slurm", "pbs"))
    return 20.0 if slow else 0.5


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    """Schedule the suite for ``make test``'s parallel workers (``--dist loadgroup``).

    Runs first: pytest-xdist's own hook, registered after this file in each worker, reads
    the ``xdist_group`` marks added here (else every test would be a group of its own).

    Tests that share a module-scoped fixture (a whole workflow run) go to one worker
    (``xdist_group`` named after the module), so the run happens once; tests that change a
    shared scheduler's state (:data:`SCHEDULER_STATE`) share one group. Then the longest
    units come first (:data:`DURATIONS`; longest-processing-time-first scheduling), so no
    worker starts a 3-minute test when the others are done. Within a group, file order
    is kept.
    """
    groups = {}
    for item in items:
        defs = getattr(item, "_fixtureinfo", None)
        names = defs.name2fixturedefs if defs is not None else {}
        group = SCHEDULER_STATE_TESTS.get(item.nodeid)
        group = group or next((g for f, g in SCHEDULER_STATE.items() if f in names), None)
        # One scheduler's tests one after another, beside everything else: the single
        # 2-core node of CI's Slurm and PBS would otherwise queue one test's jobs behind
        # another's until a test's time limit.
        group = group or next((m for m in SCHEDULER_MARKS if item.get_closest_marker(m)),
                              None)
        if group is None and any(d and d[-1].scope == "module" for d in names.values()):
            group = f"module:{item.path.relative_to(ROOT)}"
        if group is not None:
            item.add_marker(pytest.mark.xdist_group(group))
        groups[item.nodeid] = group or item.nodeid
    known = json.loads(DURATIONS.read_text()) if DURATIONS.is_file() else {}
    unit_seconds = {}
    for item in items:
        unit = groups[item.nodeid]
        unit_seconds[unit] = unit_seconds.get(unit, 0.0) + known.get(
            item.nodeid, _guess_seconds(item))
    first = {}
    for i, item in enumerate(items):
        first.setdefault(groups[item.nodeid], i)
    items.sort(key=lambda it: (-unit_seconds[groups[it.nodeid]], first[groups[it.nodeid]]))


def pytest_collection_finish(session):
    """Stop at once if pytest-xdist ignored the groups (tests would collide on a scheduler).

    ``--dist loadgroup`` works by appending ``@group`` to each grouped test's node id in
    the worker; with pytest 9.2 and pytest-xdist 3.8 that silently does nothing
    (pytest-xdist issue 1386, hence ``pytest<9.2`` in pyproject.toml).
    """
    if not getattr(session.config.option, "loadgroup", False):
        return
    lost = [item.nodeid for item in session.items
            if item.get_closest_marker("xdist_group") and "@" not in item.nodeid]
    if lost:
        pytest.exit(f"pytest-xdist --dist loadgroup ignored the xdist_group of {len(lost)} "
                    f"tests (e.g. {lost[0]}): this pytest and pytest-xdist do not work "
                    "together; install envs/lock/test.txt (make test does)", returncode=4)


_measured: dict[str, float] = {}


def pytest_runtest_logreport(report):
    """Add up each test's setup, call and teardown (for ``make durations``), under its id
    as collected (without the ``@group`` pytest-xdist's ``--dist loadgroup`` appends in
    the workers: :func:`pytest_collection_modifyitems` looks the ids up before that)."""
    nodeid = re.sub(r"@[^\]]*$", "", report.nodeid)
    _measured[nodeid] = _measured.get(nodeid, 0.0) + report.duration


def pytest_sessionfinish(session, exitstatus):
    """Write the measured durations where NCREEL_DURATIONS_OUT says (``make durations``).

    Only the process that runs the session writes: pytest-xdist's workers report to it.
    """
    out = os.environ.get("NCREEL_DURATIONS_OUT")
    if out and not hasattr(session.config, "workerinput") and _measured:
        kept = {k: round(v, 1) for k, v in sorted(_measured.items()) if v >= 1.0}
        Path(out).write_text(json.dumps(kept, indent=0) + "\n")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """A test that fails in ``subprocess.run(..., check=True)`` shows the program's own
    message (psql, ffmpeg, qsub, snakemake), not only ``CalledProcessError: exit status N``.

    A test that could not start a system program of :data:`SYSTEM_PROGRAMS` because it is
    not installed at all is reported as skipped with that reason (checked against PATH, so a
    program that is installed and fails still fails the test).
    """
    outcome = yield
    report = outcome.get_result()
    err = call.excinfo.value if call.excinfo is not None else None
    if isinstance(err, subprocess.CalledProcessError):
        report.sections.append(("failed program", program_failure_text(err)))
    if (isinstance(err, FileNotFoundError) and err.filename in SYSTEM_PROGRAMS
            and shutil.which(err.filename) is None):
        report.outcome = "skipped"
        report.longrepr = (str(item.path), item.location[1] or 0,
                           f"Skipped: {missing_program_reason(err.filename)}")


@pytest.fixture(autouse=True)
def _undo_process_state():
    """Undo what a test leaves behind in the test process that points into its ``tmp_path``
    (removed after a passing test; later tests would then fail in a removed directory).

    - the working directory (a test's ``os.chdir``);
    - what a script adapter run in-process (``runpy``) sets up for a job:
      :func:`ncreel.run.logs.configure` gives the root logger a file handler on the job's log
      and sets ``sys.excepthook`` and warning capture. pytest's own capture handlers are
      left to pytest.
    """
    cwd = os.getcwd()
    root = logging.getLogger()
    before, level, hook = list(root.handlers), root.level, sys.excepthook
    yield
    os.chdir(cwd)
    for handler in list(root.handlers):
        if handler not in before and not type(handler).__module__.startswith("_pytest"):
            root.removeHandler(handler)
            handler.close()
    root.setLevel(level)
    sys.excepthook = hook
    logging.captureWarnings(False)


@pytest.fixture(scope="session")
def sample_nc() -> Path:
    """The real HadCM3 sample (A1B_north_america.nc) from iris-sample-data."""
    from ncreel.sample import sample_path

    return sample_path("A1B_north_america.nc")


@pytest.fixture(scope="session")
def pg_server():
    """A throw-away PostgreSQL server on a unix socket in a temp dir; yields its conninfo.

    See :func:`pgserver.start_server` (shared with the benchmarks).
    """
    from pgserver import start_server

    if not have_program("initdb"):
        pytest.skip(missing_program_reason("initdb"))
    info, stop = start_server()
    try:
        yield info
    finally:
        stop()


@pytest.fixture
def postgis_conn(pg_server):
    """A psycopg 3 connection (autocommit) to a new database of :func:`pg_server` with the
    PostGIS extension created; skipped, with the reason, when PostGIS is not installed."""
    import uuid

    import psycopg
    from pgserver import postgis_package

    package = postgis_package()
    if package is not None:
        pytest.skip(f"needs PostGIS (Debian package {package}), not installed: as root "
                    "`make sysdeps` installs it")
    name = f"gis_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(pg_server["conninfo"], autocommit=True) as admin:
        admin.execute(f"CREATE DATABASE {name}")
    conninfo = pg_server["conninfo"].replace("dbname=postgres", f"dbname={name}")
    try:
        with psycopg.connect(conninfo, autocommit=True) as conn:
            conn.execute("CREATE EXTENSION postgis")
            yield conn
    finally:
        with psycopg.connect(pg_server["conninfo"], autocommit=True) as admin:
            admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


@pytest.fixture
def pg_conn(pg_server):
    """A psycopg 3 connection to :func:`pg_server` (autocommit)."""
    import psycopg

    with psycopg.connect(pg_server["conninfo"], autocommit=True) as conn:
        yield conn


@pytest.fixture(scope="session")
def eofs_data() -> Path:
    """Directory of the real NetCDF examples shipped by the PyPI package eofs."""
    import eofs

    return Path(eofs.__file__).parent / "examples" / "example_data"


def derive_nc(src: Path, dest: Path, *, variable: str, rename: dict | None = None,
              time_attrs: dict | None = None, drop_attrs: bool = False) -> Path:
    """Write a copy of a real file with its time axis renamed/re-encoded (messy-input tests)."""
    import xarray as xr

    with xr.open_dataset(src, decode_times=False) as ds:
        ds = ds[[variable]].load()
    time = [d for d in ds[variable].dims if d in ds.coords and "since" in
            str(ds[d].attrs.get("units", ""))][0]
    if time_attrs is not None:
        ds[time].attrs = dict(time_attrs)
    if drop_attrs:
        ds[time].attrs = {}
    if rename:
        ds = ds.rename(rename)
        ds.encoding.pop("unlimited_dims", None)
    ds.to_netcdf(dest)
    return dest


#: Pressure levels of :func:`plev_file`, Pa.
PLEV_PA = (100000.0, 85000.0, 50000.0)


def plev_file(eofs_data: Path, dest: Path) -> Path:
    """eofs' real DJF geopotential height (one 500 hPa level) on a CMIP-style ``plev`` in
    Pa with three levels: the file's field scaled for 1000 and 850 hPa (sel tests)."""
    import numpy as np
    import xarray as xr

    with xr.open_dataset(eofs_data / "hgt_djf.nc", decode_times=False) as ds:
        ds = ds.load()
    z = ds["z"].isel(pressure=0, drop=True)
    stack = xr.concat([z * f for f in (0.2, 0.3, 1.0)], dim="plev").assign_coords(
        plev=("plev", np.array(PLEV_PA, "f4")))
    stack["plev"].attrs.update(units="Pa", standard_name="air_pressure", axis="Z",
                               positive="down")
    out = ds.drop_vars(["z", "pressure"]).assign(
        z=stack.transpose("time", "plev", "latitude", "longitude"))
    out["z"].attrs = ds["z"].attrs
    out.to_netcdf(dest)
    return dest


def fill_disk(directory: Path, name: str = "someone-else") -> Path:
    """Take every free block of the file system holding `directory` with one file (another
    user's files); return the file. The disk-full tests mount a small tmpfs first."""
    import os

    filler = Path(directory) / name
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT)
    try:
        while os.write(fd, b"\0" * 65536):
            pass
    except OSError:
        pass  # ENOSPC: full
    finally:
        os.close(fd)
    return filler
