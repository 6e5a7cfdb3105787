"""The PBS Pro executor plugin (``--executor pbs-pro``): batched status, arrays, sub-jobs.

Unit tests read ``qstat`` output RECORDED on the CI machine's real OpenPBS 23.06.06
(``tests/data/qstat_pbspro_arrays/``); the sub-job runner runs for real. The tests on the
real PBS server are in ``tests/integration/test_pbs.py``.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import PLUGIN, ROOT
from snakemake_executor_plugin_pbs_pro import checks, state, subjob, submit_string
from snakemake_executor_plugin_pbs_pro import job_status_query as status_query
from snakemake_executor_plugin_pbs_pro.arrays import write_manifest
from test_cluster_pbs import FakeQstat

ARRAYS = ROOT / "tests" / "data" / "qstat_pbspro_arrays"
RECORDED = (153, (ARRAYS / "array_running_memkilled_plain_exit3.txt").read_text(),
            (ARRAYS / "array_running_memkilled_plain_exit3.stderr").read_text())


IDS = ["18[0].vm", "18[1].vm", "18[2].vm", "19.vm", "99999.vm"]


def test_one_qstat_for_all_jobs_and_sub_jobs(tmp_path):
    """Five jobs (three sub-jobs of one array, a plain job, a purged job): ONE qstat,
    each array asked for once; X with 0 is success, -27 failed, R running, a purged job
    without a recorded exit status failed."""
    runner = FakeQstat([RECORDED])
    got = status_query.statuses(IDS, state_dir=tmp_path, runner=runner, delay=0, log=lambda m: None)
    assert runner.calls == [["qstat", "-x", "-f", "-t", "18[].vm", "19.vm", "99999.vm"]]
    assert got == {"18[0].vm": "success", "18[1].vm": "failed", "18[2].vm": "running",
                   "19.vm": "failed", "99999.vm": "failed"}


def test_purged_job_decided_by_recorded_exit_status(tmp_path):
    state.write_marker("99999.vm", 0, tmp_path)
    got = status_query.statuses(IDS, state_dir=tmp_path, runner=FakeQstat([RECORDED]), delay=0,
                       log=lambda m: None)
    assert got["99999.vm"] == "success"


def test_qstat_hiccup_retried_then_answered(tmp_path):
    runner = FakeQstat([(1, "", "pbs_iff: cannot connect to host"),
                        subprocess.TimeoutExpired("qstat", 60), RECORDED])
    got = status_query.statuses(IDS, state_dir=tmp_path, runner=runner, delay=0, log=lambda m: None)
    assert len(runner.calls) == 3 and got["18[1].vm"] == "failed"


def test_qstat_down_keeps_jobs_running_unless_recorded(tmp_path):
    state.write_marker("19.vm", 3, tmp_path)
    runner = FakeQstat([])
    got = status_query.statuses(["18[2].vm", "19.vm"], state_dir=tmp_path, runner=runner,
                       attempts=3, delay=0, log=lambda m: None)
    assert len(runner.calls) == 3
    assert got == {"18[2].vm": "running", "19.vm": "failed"}


def test_array_parent():
    assert status_query.array_parent("123[4].desched1") == "123[].desched1"
    assert status_query.array_parent("123[].casper") == "123[].casper"
    assert status_query.array_parent("123.casper") == "123.casper"


def props(**kw):
    base = {"type": "single", "rule": "process_shard", "wildcards": {}, "jobid": 7,
            "threads": 2, "resources": {"mem_mb": 1500, "runtime": 12}}
    return {**base, **kw}


def test_array_qsub_line():
    cmd = submit_string.build_qsub(props(), "/w/a.sh", queue="casper@casper-pbs",
                                   account="UABC0001", log_dir="logs/pbs", array_size=4,
                                   log_tag="abc")
    assert cmd == ["qsub", "-N", "nc_process_shard", "-j", "oe", "-o",
                   "logs/pbs/nc_process_shard.abc.^array_index^.log", "-l",
                   "select=1:ncpus=2:mem=1500MB,walltime=00:12:00",
                   "-v", "SNAKEMAKE_PBS_PRO_JOB_OVERHEAD_MB=0", "-J", "0-3", "-A", "UABC0001",
                   "-q", "casper@casper-pbs", "/w/a.sh"]
    with pytest.raises(ValueError, match="at least 2"):
        submit_string.build_qsub(props(), "a.sh", queue=None, account=None, log_dir="l",
                                 array_size=1)


def test_mem_request_is_declared_mem_plus_the_jobs_own_snakemake():
    """A rule declaring mem="5MB" (Snakemake's harness, rule c) gets at least the job's own
    Snakemake process (a command it starts counts as a second copy of it until the
    command's program runs) plus that process, and the job learns what was added; a
    larger rule gets its mem_mb plus the overhead; a whole-node request and a zero
    overhead are left as they are."""
    assert submit_string.request_mem_mb(5, 200) == 400
    assert submit_string.request_mem_mb(300, 300) == 600
    assert submit_string.request_mem_mb(1500, 300) == 1800
    assert submit_string.request_mem_mb(4.2, 0) == 5
    with pytest.raises(ValueError, match="0 or more"):
        submit_string.request_mem_mb(5, -1)
    cmd = submit_string.build_qsub(props(resources={"mem_mb": 5, "runtime": 1}), "/w/a.sh",
                         queue=None, account=None, log_dir="l", job_overhead_mb=200)
    assert cmd[cmd.index("-l") + 1] == "select=1:ncpus=2:mem=400MB,walltime=00:01:00"
    assert cmd[cmd.index("-v") + 1] == "SNAKEMAKE_PBS_PRO_JOB_OVERHEAD_MB=200"
    # No mem_mb declared: the default plus the overhead.
    cmd = submit_string.build_qsub(props(resources={}), "/w/a.sh", queue=None, account=None,
                         log_dir="l", job_overhead_mb=150)
    assert "mem=1150MB" in cmd[cmd.index("-l") + 1]
    node = submit_string.build_qsub(props(), "/w/a.sh", queue=None, account=None, log_dir="l",
                          node_cores=128, node_mem_gb=235, job_overhead_mb=200)
    assert node[node.index("-l") + 1].startswith("select=1:ncpus=128:mem=235GB,")
    # 0 too: the job learns which executor submitted it (it resubmits only what it should,
    # so a memory-killed attempt that saw SIGTERM is retried, not taken for a qdel).
    zero = submit_string.build_qsub(props(), "/w/a.sh", queue=None, account=None,
                                    log_dir="l", job_overhead_mb=0)
    assert zero[zero.index("-v") + 1] == "SNAKEMAKE_PBS_PRO_JOB_OVERHEAD_MB=0"


def test_jobs_get_the_variables_they_need_by_name_never_all(tmp_path):
    """No ``-V`` (it put every token and cloud key of the user's shell in the job's
    Variable_List, which ``qstat -f`` shows to every user): ``-v`` with the names of what a
    job needs, those the setting and ``--envvars`` add, never PGPASSWORD; a value ``qsub -v``
    cannot carry (a quote, a backslash) is left out and named."""
    environ = {"PATH": "/venv/bin:/usr/bin", "LANG": "en_US.UTF-8", "LC_TIME": "C",
               "VIRTUAL_ENV": "/venv", "SNAKEMAKE_PROFILE": "casper", "HOME": "/home/ada",
               "MY_API_TOKEN": "tok", "AWS_SECRET_ACCESS_KEY": "k", "PGPASSWORD": "pw",
               "PGHOST": "db", "NCREEL_X": "1", "ODD": "a'b", "TMPDIR": "/tmp/login"}
    names, unsafe = submit_string.job_env_names(["NCREEL_*", "PGHOST", "ODD", "PGPASSWORD"],
                                                environ)
    assert names == ["LANG", "LC_TIME", "NCREEL_X", "PATH", "PGHOST", "SNAKEMAKE_PROFILE",
                     "VIRTUAL_ENV"]
    assert unsafe == ["ODD"]
    cmd = submit_string.build_qsub(props(), "/w/a.sh", queue=None, account=None,
                                   log_dir="l", job_overhead_mb=200, env=names)
    assert "-V" not in cmd
    assert cmd[cmd.index("-v") + 1] == ",".join(
        [*names, "SNAKEMAKE_PBS_PRO_JOB_OVERHEAD_MB=200"])
    # The executor: the setting and Snakemake's --envvars, the unsafe one said once.
    from snakemake_executor_plugin_pbs_pro.executor import ExecutorSettings
    from snakemake_executor_plugin_pbs_pro.run import PbsRun

    said = []
    settings = ExecutorSettings(queue="q", no_account=True, env="NCREEL_*, ODD")
    run = PbsRun(settings, runner=None, state_dir=tmp_path, environ=environ,
                 log=said.append, check_commands=False, envvars=["MY_API_TOKEN"])
    assert run.qsub_kw()["env"] == ["LANG", "LC_TIME", "MY_API_TOKEN", "NCREEL_X", "PATH",
                                    "SNAKEMAKE_PROFILE", "VIRTUAL_ENV"]
    assert said == ["pbs-pro: not passed to PBS jobs: ODD (a quote or a backslash in the "
                    "value, which qsub -v cannot carry)"]


def test_job_overhead_setting_and_the_workflows_side_agree():
    """The executor's setting defaults to the measured overhead, and ncreel's resources
    module recognises the variable the executor sets in each job (so it adds nothing)."""
    from ncreel.run import resources
    from snakemake_executor_plugin_pbs_pro import ExecutorSettings

    assert ExecutorSettings().job_overhead_mb == submit_string.DEFAULT_JOB_OVERHEAD_MB
    assert resources.PBS_PRO_JOB_OVERHEAD_ENV == submit_string.JOB_OVERHEAD_ENV


# ----------------------------------------------------------------------------- sub-jobs


@pytest.fixture
def manifest(tmp_path):
    """A manifest of three entries whose jobscripts write their shard into a file."""
    entries = []
    for i in range(3):
        script = tmp_path / f"job{i}.sh"
        script.write_text(f"echo shard{i} > {tmp_path}/ran{i}\nexit {i}\n")
        entries.append({"index": i, "jobid": 10 + i, "rule": "process_shard",
                        "wildcards": {"shard": f"{i:05d}"}, "jobscript": str(script),
                        "sha256": hashlib.sha256(script.read_bytes()).hexdigest()})
    arrays = tmp_path / ".snakemake" / "pbs-pro" / "arrays"
    return write_manifest(arrays / "m.json", entries)


def run_subjob(manifest, **env):
    e = {k: v for k, v in os.environ.items() if not k.startswith("PBS_")}
    e["PYTHONPATH"] = str(PLUGIN)  # the plugin alone: the runner needs no ncreel
    e.update(env)
    return subprocess.run([sys.executable, "-m", "snakemake_executor_plugin_pbs_pro.subjob",
                           str(manifest)], env=e, capture_output=True, text=True)


def test_subjob_runs_its_own_entry_and_records_status(manifest, tmp_path):
    proc = run_subjob(manifest, PBS_ARRAY_INDEX="1", PBS_JOBID="55[1].vm")
    assert proc.returncode == 1, proc.stderr
    assert "runs Snakemake job 11 (process_shard" in proc.stdout
    assert (tmp_path / "ran1").read_text() == "shard1\n"
    assert not (tmp_path / "ran0").exists() and not (tmp_path / "ran2").exists()
    assert state.read_marker("55[1].vm", manifest.parent.parent) == 1


@pytest.mark.parametrize("env, why", [
    ({"PBS_JOBID": "55[1].vm"}, "PBS_ARRAY_INDEX"),
    ({"PBS_ARRAY_INDEX": "1", "PBS_JOBID": "55[2].vm"}, "not sub-job 1"),
    ({"PBS_ARRAY_INDEX": "1", "PBS_JOBID": "55.vm"}, "not sub-job 1"),
    ({"PBS_ARRAY_INDEX": "3", "PBS_JOBID": "55[3].vm"}, "no entry 3"),
    ({"PBS_ARRAY_INDEX": "-1", "PBS_JOBID": "55[-1].vm"}, "PBS_ARRAY_INDEX"),
])
def test_subjob_refuses_anything_but_its_own_entry(manifest, tmp_path, env, why):
    proc = run_subjob(manifest, **env)
    assert proc.returncode == subjob.REFUSED and why in proc.stderr
    assert not list(tmp_path.glob("ran*"))


def test_subjob_refuses_a_changed_jobscript(manifest, tmp_path):
    entry = json.loads(manifest.read_text())["jobs"][0]
    with open(entry["jobscript"], "a") as fh:
        fh.write("echo injected\n")
    with pytest.raises(subjob.Refused, match="changed"):
        subjob.own_entry(manifest, {"PBS_ARRAY_INDEX": "0", "PBS_JOBID": "55[0].vm"})


# ------------------------------------------------- a qstat that cannot serve: stop, once
# Against the real commands of this machine: Slurm's Torque wrapper /usr/bin/qstat (what
# a Torque site or a mixed PATH gives) rejects PBS Pro's -x; /opt/pbs/bin is PBS Pro's.
TORQUE_QSTAT = "/usr/bin/qstat"
PBS_BIN = "/opt/pbs/bin"


@pytest.fixture
def torque_qstat():
    """Slurm's Torque wrapper ``qstat`` (package slurm-wlm-torque); fails when absent."""
    path = os.path.realpath(TORQUE_QSTAT)
    text = Path(path).read_text(errors="replace") if os.path.exists(path) else ""
    if "slurm" not in text.lower():
        pytest.fail(f"{TORQUE_QSTAT} is not Slurm's Torque wrapper: run .ci/slurm-up.sh")
    return TORQUE_QSTAT


class Counting:
    """Runs each command for real (the plugin's runner) and keeps the argument lists."""

    def __init__(self):
        self.calls = []

    def __call__(self, cmd, timeout=60):
        self.calls.append(cmd)
        return status_query._run(cmd, timeout=timeout)


@pytest.mark.pbs
def test_qstat_rejecting_x_stops_at_once_naming_it(torque_qstat, tmp_path):
    """Torque's qstat answers ``qstat -x`` with "Unknown option": one call, no retries
    (4 tries with 5 s pauses would be 30 s), one message naming the qstat and the fix."""
    runner = Counting()
    with pytest.raises(status_query.QstatUnusable) as err:
        status_query.statuses(["7.vm", "8[].vm"], qstat=torque_qstat, state_dir=tmp_path,
                     attempts=4, delay=5, runner=runner, strict=False)
    assert len(runner.calls) == 1
    msg = str(err.value)
    assert f"{torque_qstat} rejects `qstat -x -f -t`" in msg and "Unknown option" in msg
    assert "PATH=/opt/pbs/bin:$PATH" in msg and "\n" not in msg


@pytest.mark.pbs
def test_start_up_check_of_the_pbs_commands(torque_qstat, tmp_path):
    """Before any job: PBS Pro's commands pass; Torque's qstat or a missing qsub/qstat
    is named, with what to do."""
    assert status_query.pbs_pro_problem(qsub=f"{PBS_BIN}/qsub", qstat=f"{PBS_BIN}/qstat") is None
    msg = status_query.pbs_pro_problem(qsub=f"{PBS_BIN}/qsub", qstat=torque_qstat)
    assert msg.startswith(f"{torque_qstat} is not PBS Pro's qstat")
    assert "Unknown option: version" in msg and "PATH=/opt/pbs/bin:$PATH" in msg
    missing = str(tmp_path / "qsub")
    assert status_query.pbs_pro_problem(qsub=missing, qstat=f"{PBS_BIN}/qstat").startswith(
        f"{missing} not found on PATH")
    with pytest.raises(status_query.QstatUnusable, match="not found on PATH"):
        status_query.statuses(["7.vm"], qstat=str(tmp_path / "qstat"), state_dir=tmp_path)


def _run(tmp_path, runner, **settings):
    """The pbs-pro executor's run state, made as the executor makes it (no Snakemake)."""
    from snakemake_executor_plugin_pbs_pro.executor import ExecutorSettings
    from snakemake_executor_plugin_pbs_pro.run import PbsRun

    return PbsRun(ExecutorSettings(no_account=True, **settings), runner=runner,
                  state_dir=tmp_path, check_commands=False)


@pytest.mark.pbs
def test_executor_stops_when_qstat_keeps_failing(tmp_path, monkeypatch):
    """A server that never answers (PBS Pro's real qstat, a port nothing listens on):
    each poll keeps the jobs running, the third poll in a row stops the run with one
    line naming the error and the jobs left; a poll that works resets the count."""
    from snakemake_executor_plugin_pbs_pro.run import RunStopped

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PATH", f"{PBS_BIN}:{os.environ['PATH']}")
    run = _run(tmp_path, Counting(), qstat_attempts=1, qstat_failed_polls=3)
    ids = ["5.localhost:15999"]
    running = {ids[0]: "running"}
    monkeypatch.setenv("PBS_SERVER", "localhost:15999")
    assert run.poll(ids) == running and run.poll(ids) == running
    monkeypatch.delenv("PBS_SERVER")
    assert run.poll(["999999.vm"]) == {"999999.vm": "failed"}  # answered: purged
    assert run.failed_polls == 0
    monkeypatch.setenv("PBS_SERVER", "localhost:15999")
    run.poll(ids), run.poll(ids)
    with pytest.raises(RunStopped) as err:
        run.poll(ids)
    msg = str(err.value)
    assert msg.startswith("pbs-pro: error: cannot follow the run's PBS jobs: qstat")
    assert "(3 polls in a row)" in msg and "5.localhost:15999" in msg and "\n" not in msg
    assert len(run.runner.calls) == 6


@pytest.mark.pbs
def test_executor_stops_at_once_on_a_torque_qstat(torque_qstat, tmp_path, monkeypatch):
    from snakemake_executor_plugin_pbs_pro.run import RunStopped

    monkeypatch.chdir(tmp_path)
    run = _run(tmp_path, lambda cmd, timeout=60: status_query._run([torque_qstat, *cmd[1:]],
                                                                   timeout))
    with pytest.raises(RunStopped, match=r"rejects `qstat -x -f -t` \('Unknown option"):
        run.poll(["7.vm"])


class BusyFirst(Counting):
    """PBS Pro's real commands, but the server is busy for the first `n` calls: they
    fail as OpenPBS's client does when it cannot reach the server."""

    def __init__(self, n):
        super().__init__()
        self.n = n

    def __call__(self, cmd, timeout=60):
        if len(self.calls) < self.n:
            self.calls.append(cmd)
            return subprocess.CompletedProcess(cmd, 1, "", "pbs_iff: cannot connect to host\n"
                                               "qstat: cannot connect to server vm (errno=15010)")
        return super().__call__(cmd, timeout)


@pytest.mark.pbs
def test_start_up_check_retries_a_busy_server_like_a_running_one(tmp_path):
    """qstat failing its first 3 calls at start is asked again (4 tries, growing pauses)
    and passes; one that keeps failing is said to be unreachable, not "not PBS Pro's"."""
    pauses = []
    runner = BusyFirst(3)
    assert status_query.pbs_pro_problem(qsub=f"{PBS_BIN}/qsub", qstat=f"{PBS_BIN}/qstat",
                               runner=runner, attempts=4, sleep=pauses.append) is None
    assert len(runner.calls) == 4 and pauses == [2.0, 4.0, 6.0]
    msg = status_query.pbs_pro_problem(qsub=f"{PBS_BIN}/qsub", qstat=f"{PBS_BIN}/qstat",
                              runner=BusyFirst(9), attempts=4, sleep=lambda s: None)
    assert "failed 4 times" in msg and "busy or unreachable" in msg
    assert "not PBS Pro's" not in msg and "cannot connect to host" in msg


@pytest.mark.pbs
def test_queue_on_a_server_that_does_not_answer_or_of_odd_text_is_refused(monkeypatch):
    """Before any job: ``queue@server`` whose server does not answer (3 tries) and a
    destination qstat calls illegal are refused in one line; the real queues pass."""
    monkeypatch.setenv("PATH", f"{PBS_BIN}:{os.environ['PATH']}")
    from odd_text import payload

    assert checks.queue_problem("share", sleep=lambda s: None) is None
    runner = Counting()
    msg = checks.queue_problem("share@nosuchhost.invalid", runner=runner, sleep=lambda s: None)
    assert msg.startswith("PBS server 'nosuchhost.invalid' of queue 'share@nosuchhost."
                          "invalid' does not answer") and len(runner.calls) == 3
    msg = checks.queue_problem(payload("q"), sleep=lambda s: None)
    assert "is not a valid destination" in msg and "\n" not in msg
    assert checks.queue_problem("nosuch", sleep=lambda s: None).startswith(
        "PBS queue 'nosuch' does not exist")


@pytest.mark.parametrize("log_dir, refused", [
    ("logs/pbs", False), ("a/../b", False), ("/var/tmp/pbs-logs", False), ("..", True),
    ("../..", True), ("../logs", True), ("logs/../../x", True), ("", True)])
def test_log_dir_outside_the_working_directory_is_refused_unless_absolute(log_dir, refused):
    msg = checks.log_dir_problem(log_dir)
    assert (msg is not None) == refused, msg
    if msg and log_dir:
        assert "leads out of the working directory" in msg and "absolute path" in msg


def test_odd_settings_reach_qsub_and_the_job_wrapper_verbatim(tmp_path):
    """Queue, account, log directory and extra resources holding every shell
    metacharacter are single qsub arguments, never shell text; the job wrapper (run by
    bash as PBS runs it) records the exit status in a state directory of such a name and
    runs the jobscript of such a name, executing nothing else."""
    from odd_text import payload

    odd = payload("s")
    cmd = submit_string.build_qsub(props(), "/w/a.sh", queue=odd, account=odd, log_dir=odd,
                         extra_l=[odd])
    assert cmd[cmd.index("-q") + 1] == odd and cmd[cmd.index("-A") + 1] == odd
    assert cmd[cmd.index("-o") + 1].startswith(odd + "/")
    assert cmd[cmd.index("-l") + 1].endswith("," + odd)
    folder = tmp_path / payload("d")
    folder.mkdir()
    jobscript = folder / (payload("j") + ".sh")
    jobscript.write_text("#!/bin/sh\necho ran > ran.txt\nexit 3\n")
    wrapper = submit_string.write_wrapper(jobscript, folder / "state")
    proc = subprocess.run(["bash", str(wrapper)], cwd=tmp_path, capture_output=True,
                          text=True, env={**os.environ, "PBS_JOBID": "42.vm"})
    assert proc.returncode == 3, proc.stderr
    assert state.read_marker("42.vm", folder / "state") == 3
    assert (tmp_path / "ran.txt").read_text() == "ran\n"
    assert not list(tmp_path.rglob("PWNED*"))


# ----------------------------------------------------------------------------- --config


@pytest.mark.parametrize("value", ["x'$(touch PWNED)", "a\\b", "two\nlines", "{x}", ""])
def test_config_values_reach_jobs_by_the_plugins_own_file_exactly(value, tmp_path):
    """The plugin's own ``--config`` file (no ncreel): no value on the job's command line,
    the job loads exactly the values the main process has, nothing is executed; the
    same values share one file; none, no file; a directory that cannot be made is one
    line."""
    from snakemake.common.configfile import load_configfile
    from snakemake.settings.types import ConfigSettings
    from snakemake_executor_plugin_pbs_pro.configfile import (
        ConfigFileError,
        pass_config_by_file,
    )
    from snakemake_interface_executor_plugins.utils import format_cli_arg
    from test_jobtext import settings, sh

    values = {"table": value, "select": {"level": value}, "vmin": 1.5}
    cs = settings(values)
    path = pass_config_by_file(cs, tmp_path / "rc")
    assert format_cli_arg("--config", cs.config_args) == "" and cs.configfiles == [path]
    argv = sh(format_cli_arg("--configfiles", cs.configfiles), tmp_path)
    assert argv == ["--configfiles", str(path)]
    assert load_configfile(argv[1]) == values
    assert pass_config_by_file(settings(values), tmp_path / "rc") == path
    assert not list(tmp_path.rglob("PWNED*"))
    assert pass_config_by_file(ConfigSettings(), tmp_path / "none") is None
    assert not (tmp_path / "none").exists()
    (tmp_path / "file").write_text("a file where a folder must be")
    with pytest.raises(ConfigFileError, match="cannot write the run's config file"):
        pass_config_by_file(settings(values), tmp_path / "file" / "rc")
