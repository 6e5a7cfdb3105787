"""The PBS status command and submit line (``ncreel.cluster.pbs``), on recorded and
documented output.

Sources of the ``qstat`` text used here:

- ``tests/data/qstat_torque/*.txt``: **recorded** ``qstat -f`` output of Slurm 22.05's
  Torque wrapper on the CI machine (see the README there). It never shows an exit status.
- ``tests/data/qstat_pbspro/*.json``: PBS Pro ``qstat -x -f -F json`` documents
  **recorded** from a real OpenPBS 23.06.06 server (``.ci/pbs-up.sh``) by
  ``tests/integration/test_pbs.py::test_status_command_on_real_job_endings`` (``exiting.json``
  by ``test_exiting_state_for_real``; see the README there). Exit codes: OpenPBS
  ``src/include/job.h`` (JOB_EXEC_KILL_MEM -27, JOB_EXEC_KILL_WALLTIME -29) and
  "256 + signal" (265 = SIGKILL; qdel's SIGTERM gives 271, or 143 from the job's shell).
- ``TORQUE_DOC``: the ``qstat -f`` example in Adaptive Computing's TORQUE 3.0.5 manual,
  section 2.7 "Job Exit Status"
  (http://docs.adaptivecomputing.com/torque/3-0-5/2.7jobexitstatus.php).
- ``PBSPRO_TEXT``: PBS Pro's 4-space-indented ``qstat -f`` as shown in OpenPBS issue
  https://github.com/openpbs/openpbs/issues/2541 (trimmed), with ``Exit_status`` added the
  way PBS Pro spells it (radical.saga issue #402).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT
from ncreel.cluster import pbs
from snakemake_executor_plugin_pbs_pro import state, submit_string

DATA = ROOT / "tests" / "data"
TORQUE_REC = DATA / "qstat_torque"
PBSPRO = DATA / "qstat_pbspro"

TORQUE_DOC = """Job Id: 179.host
    Job_Name = STDIN
    Job_Owner = user@host
    job_state = C
    queue = batchq
    server = host
    Checkpoint = u
    ctime = Fri Aug 29 14:55:55 2008
    Error_Path = host:/opt/moab/STDIN.e179
    exec_host = node1/0
    Hold_Types = n
    Join_Path = n
    Keep_Files = n
    Mail_Points = a
    mtime = Fri Aug 29 14:55:55 2008
    Output_Path = host:/opt/moab/STDIN.o179
    Priority = 0
    qtime = Fri Aug 29 14:55:55 2008
    Rerunable = True
    Resource_List.ncpus = 2
    Resource_List.nodect = 1
    Resource_List.nodes = node1
    Variable_List = PBS_O_HOME=/home/user,PBS_O_LOGNAME=user,
\tPBS_O_PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:,PBS_O_SHELL=/bin/bash
    sched_hint = Post job file processing error; job 179.host on host node1/0Ba
\td UID for job execution REJHOST=pala.cridomain MSG=cannot find user 'user' in password file
    etime = Fri Aug 29 14:55:55 2008
    exit_status = -1
"""

PBSPRO_TEXT = """Job Id: 4.scheduler
    Job_Name = STDIN
    Job_Owner = adminuser@execute-1.internal.cloudapp.net
    resources_used.cpupercent = 0
    resources_used.mem = 9692kb
    resources_used.walltime = 00:00:10
    job_state = F
    queue = workq
    server = scheduler
    exec_host = execute-2/0
    Resource_List.ncpus = 1
    Resource_List.select = 1
    Exit_status = 0
"""


class FakeQstat:
    """Stands in for subprocess.run: answers per command from a script of results."""

    def __init__(self, results):
        self.results = list(results)
        self.calls = []

    def __call__(self, cmd, timeout=60):
        self.calls.append(cmd)
        if cmd[0] == "sacct":
            return subprocess.CompletedProcess(cmd, 1, "", "sacct: not here")
        out = self.results.pop(0) if self.results else (1, "", "server down")
        if isinstance(out, BaseException):
            raise out
        rc, stdout, stderr = out
        return subprocess.CompletedProcess(cmd, rc, stdout, stderr)


def test_a_pbs_job_is_never_looked_up_in_slurms_accounting(tmp_path, monkeypatch):
    """A PBS job deleted before it ran has no Exit_status. Where Slurm runs too (its Torque
    wrappers are why sacct is asked at all), Slurm's job 7 is another job: its COMPLETED
    made ``7.vm`` read ``success``, seen when both schedulers ran jobs at once."""
    runner = FakeQstat([(0, (PBSPRO / "deleted_before_run.json").read_text(), "")])
    asked = []
    # sacct is asked only where it is installed (pbs.sacct_status): one on PATH, also on a
    # machine without Slurm; the runner below answers in its place.
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "sacct").write_text("#!/bin/sh\nexit 1\n")
    (bin_dir / "sacct").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")

    def with_sacct(cmd, timeout=60):
        if cmd[0] == "sacct":
            asked.append(cmd)
            return subprocess.CompletedProcess(cmd, 0, "COMPLETED|0:0\n", "")
        return runner(cmd, timeout)

    jobid = next(iter(json.loads((PBSPRO / "deleted_before_run.json").read_text())["Jobs"]))
    assert "." in jobid
    assert status(jobid, with_sacct, tmp_path) == "failed"
    assert asked == []
    # A bare id (Slurm's qsub wrapper) still asks Slurm's accounting.
    runner.results = [UNSUPPORTED, (0, "", "")]
    assert status("7", with_sacct, tmp_path) == "success" and asked


def json_runner(name):
    return FakeQstat([(0, (PBSPRO / name).read_text(), "")])


UNSUPPORTED = (2, "", "Unknown option: x\nUnknown option: F\nUsage:\n    qstat [-f] ...\n")


def torque_runner(text):
    return FakeQstat([UNSUPPORTED, (0, text, "")])


def status(jobid, runner, tmp_path, **kw):
    return pbs.status(jobid, state_dir=tmp_path, runner=runner, delay=0, log=lambda m: None,
                      **kw)


@pytest.mark.parametrize("name, expected", [
    ("queued.json", "running"),
    ("held.json", "running"),
    ("running.json", "running"),
    ("exiting.json", "running"),
    ("finished_ok.json", "success"),
    ("finished_failed.json", "failed"),
    ("walltime_killed.json", "failed"),
    ("memory_killed.json", "failed"),
    ("killed_sigkill_265.json", "failed"),
    ("deleted_running.json", "failed"),
    ("deleted_before_run.json", "failed"),
    ("no_jobs.json", "failed"),
])
def test_pbspro_json(name, expected, tmp_path, monkeypatch):
    """PBS Pro ``qstat -x -f -F json`` (recorded from OpenPBS 23.06.06, see README)."""
    monkeypatch.setattr(pbs.time, "sleep", lambda s: None)
    jobid = next(iter(json.loads((PBSPRO / name).read_text()).get("Jobs", {"9.x": 0})))
    runner = json_runner(name)
    assert status(jobid, runner, tmp_path) == expected
    assert runner.calls[0][:5] == ["qstat", "-x", "-f", "-F", "json"]


def _recorded_id(name: str) -> str:
    return next(iter(json.loads((PBSPRO / name).read_text())["Jobs"]))


def test_pbspro_json_short_id_matches(tmp_path):
    # The id Snakemake passes is what qsub printed; accept "67" for "67.vm", and the
    # server's full name for its short one ("67.vm.example.org").
    seq, server = _recorded_id("finished_ok.json").split(".", 1)
    assert status(seq, json_runner("finished_ok.json"), tmp_path) == "success"
    assert status(f"{seq}.{server}.example.org", json_runner("finished_ok.json"),
                  tmp_path) == "success"


def test_pbspro_json_peer_server_ids_differ(tmp_path, monkeypatch):
    # Casper and Derecho are separate PBS servers: job 67 of another server is not 67.vm.
    monkeypatch.setattr(pbs.time, "sleep", lambda s: None)
    seq = _recorded_id("finished_ok.json").split(".")[0]
    jobs = pbs.parse_pbs_json((PBSPRO / "finished_ok.json").read_text())
    assert pbs._lookup(jobs, f"{seq}.casper-pbs") is None
    assert pbs._lookup(jobs, seq) is not None


def test_pbspro_exit_codes_described():
    assert "KILL_MEM" in pbs.describe_exit(-27)
    assert "WALLTIME" in pbs.describe_exit(-29)
    assert pbs.describe_exit(271) == "killed by signal 15"


@pytest.mark.parametrize("name, marker, expected", [
    ("running.txt", None, "running"),
    ("finished_ok.txt", 0, "success"),
    ("finished_failed.txt", 1, "failed"),
    ("memory_killed.txt", None, "failed"),  # killed: the wrapper never wrote its status
])
def test_slurm_torque_wrapper_recorded(name, marker, expected, tmp_path, monkeypatch):
    """Recorded ``qstat -f`` of Slurm's Torque wrapper (tests/data/qstat_torque/README.md).

    It shows ``job_state = C`` for every finished job and never an exit status, so the
    exit status the job wrapper recorded decides.
    """
    monkeypatch.setattr(pbs.time, "sleep", lambda s: None)
    text = (TORQUE_REC / name).read_text()
    jobid = pbs.parse_torque(text).popitem()[0]
    if marker is not None:
        state.marker_path(jobid, tmp_path).write_text(f"{marker}\n")
    runner = torque_runner(text)
    assert status(jobid, runner, tmp_path) == expected
    assert runner.calls[1] == ["qstat", "-f", jobid]


def test_recorded_torque_parses():
    rec = pbs.parse_torque((TORQUE_REC / "finished_failed.txt").read_text())["6"]
    assert rec["job_state"] == "C" and rec["Resource_List.walltime"] == "00:05:00"
    assert pbs.classify(rec) is None  # cannot tell success from failure


def test_purged_job_uses_marker_then_fails(tmp_path, monkeypatch):
    # ~350 s after the end Slurm's qstat -f prints nothing and exits 153.
    monkeypatch.setattr(pbs.time, "sleep", lambda s: None)
    gone = FakeQstat([UNSUPPORTED, (153, "", "")])
    assert status("9", gone, tmp_path) == "failed"
    state.marker_path("9", tmp_path).write_text("0\n")
    gone = FakeQstat([UNSUPPORTED, (153, "", "")])
    assert status("9", gone, tmp_path) == "success"


def test_real_torque_exit_status_doc_sample(tmp_path):
    """TORQUE manual's ``qstat -f`` (exit_status = -1, wrapped values)."""
    rec = pbs.parse_torque(TORQUE_DOC)["179.host"]
    assert rec["exit_status"] == "-1"
    assert rec["Variable_List"].endswith("PBS_O_SHELL=/bin/bash")
    assert status("179.host", torque_runner(TORQUE_DOC), tmp_path) == "failed"
    ok = TORQUE_DOC.replace("exit_status = -1", "exit_status = 0")
    assert status("179.host", torque_runner(ok), tmp_path) == "success"


def test_pbspro_text_format(tmp_path):
    assert pbs.parse_torque(PBSPRO_TEXT)["4.scheduler"]["Exit_status"] == "0"
    assert status("4.scheduler", torque_runner(PBSPRO_TEXT), tmp_path) == "success"


def test_transient_errors_are_retried(tmp_path):
    busy = (1, "", "qstat: cannot connect to server desched1 (errno=15010)")
    ok = (0, (PBSPRO / "finished_ok.json").read_text(), "")
    runner = FakeQstat([busy, subprocess.TimeoutExpired("qstat", 60), busy, ok])
    assert status(_recorded_id("finished_ok.json"), runner, tmp_path, attempts=4) == "success"
    assert len(runner.calls) == 4


def test_persistent_errors_report_running_not_failed(tmp_path):
    # Never report a verdict from a broken qstat: keep waiting (Snakemake asks again)...
    busy = (1, "", "qstat: cannot connect to server")
    assert status("5", FakeQstat([busy] * 3), tmp_path, attempts=3) == "running"
    # ...unless the job itself recorded how it ended.
    state.marker_path("5", tmp_path).write_text("3\n")
    assert status("5", FakeQstat([busy] * 3), tmp_path, attempts=3) == "failed"


def test_cli_without_qstat_stops_with_one_line(tmp_path):
    """No qstat on PATH: one error line and exit 2 (which stops Snakemake's cluster-generic
    executor), not ``running`` for ever."""
    proc = subprocess.run(
        [sys.executable, str(ROOT / "workflow/scripts/ncreel_pbs.py"), "status", "--attempts", "1",
         "--state-dir", str(tmp_path), "12345"],
        capture_output=True, text=True, env={"PATH": str(tmp_path)})  # no qstat on PATH
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.startswith("ncreel-pbs: error: qstat not found on PATH")
    assert proc.stderr.count("\n") == 1


# ----------------------------------------------------------------------------- submit


def props(**kw):
    base = {"type": "single", "rule": "process_shard", "wildcards": {"shard": "00001"},
            "threads": 1, "resources": {"mem_mb": 700, "runtime": 95}, "jobid": 7}
    base.update(kw)
    return base


def test_qsub_line_from_declared_resources():
    cmd = pbs.build_qsub(props(), "/w/job.sh", queue="casper", account="UABC0001",
                         log_dir="logs/pbs")
    assert cmd == ["qsub", "-N", "nc_process_shard_00001", "-j", "oe", "-o",
                   "logs/pbs/nc_process_shard_00001.7.log", "-l",
                   "select=1:ncpus=1:mem=700MB,walltime=01:35:00",
                   # Always, also 0: the job's Snakemake then knows it runs under PBS.
                   "-v", "SNAKEMAKE_PBS_PRO_JOB_OVERHEAD_MB=0", "-A", "UABC0001",
                   "-q", "casper", "/w/job.sh"]


def test_qsub_whole_node_and_walltime_cap():
    cmd = pbs.build_qsub(props(type="group", groupid="shards", threads=64,
                               resources={"mem_mb": 40000, "runtime": 2000}),
                         "j.sh", queue="main", account="A", log_dir="l",
                         max_walltime="12:00:00", node_cores=128, node_mem_gb=235)
    assert "select=1:ncpus=128:mem=235GB,walltime=12:00:00" in cmd
    assert "nc_group_shards" in cmd


@pytest.mark.parametrize("evil", ["a;rm -rf ~", "$(touch pwned)", "x y\nz", "../../etc"])
def test_names_and_logs_are_sanitised(evil):
    cmd = pbs.build_qsub(props(rule=evil, wildcards={"s": evil}), "j.sh", queue=None,
                         account=None, log_dir="logs/pbs")
    name, log = cmd[cmd.index("-N") + 1], cmd[cmd.index("-o") + 1]
    assert name[0].isalpha() and set(name) <= set(
        "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-")
    assert Path(log).parent == Path("logs/pbs") and ".." not in Path(log).name.split(".")[0]


def test_walltime_format():
    assert submit_string.walltime(5) == "00:05:00"
    assert submit_string.walltime(61.2) == "01:02:00"
    assert submit_string.walltime(0) == "00:01:00"
    assert submit_string.parse_walltime("06:00:00") == 360


def test_submit_needs_account(tmp_path):
    script = tmp_path / "snakejob.sh"
    script.write_text(f"#!/bin/sh\n# properties = {json.dumps(props())}\necho hi\n")
    with pytest.raises(pbs.MissingAccount, match="export PBS_ACCOUNT=<project code>"):
        pbs.submit(str(script), queue="q", account=None, log_dir=str(tmp_path))
    with pytest.raises(pbs.MissingAccount, match="export PROJ="):
        pbs.project_account("PROJ", environ={"PBS_ACCOUNT": "x"})
    assert pbs.project_account("PROJ", environ={"PROJ": "UABC0001"}) == "UABC0001"
    assert pbs.project_account("PROJ", no_account=True, environ={}) is None


def test_submit_cli_exits_1_with_one_error_line(tmp_path, monkeypatch, capsys):
    """Only the CLI exits; the library raises (``SubmitError``)."""
    script = tmp_path / "snakejob.sh"
    script.write_text(f"#!/bin/sh\n# properties = {json.dumps(props())}\necho hi\n")
    monkeypatch.delenv("PBS_ACCOUNT", raising=False)
    assert pbs.main(["submit", str(script), "--log-dir", str(tmp_path)]) == 1
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith("ncreel-pbs: error: PBS_ACCOUNT is unset")


def test_submit_calls_qsub_with_argument_list(tmp_path):
    script = tmp_path / "snakejob.process_shard.7.sh"
    script.write_text(f"#!/bin/sh\n# properties = {json.dumps(props())}\nexit 3\n")
    seen = []

    def runner(cmd, timeout=60):
        seen.append(cmd)
        return subprocess.CompletedProcess(cmd, 0, "4127005.desched1\n", "")

    state = tmp_path / "state"
    jobid = pbs.submit(str(script), queue="casper", account="UABC0001",
                       log_dir=str(tmp_path / "logs"), state_dir=str(state), runner=runner)
    assert jobid == "4127005.desched1"
    wrapper = Path(seen[0][-1])
    assert wrapper.read_text().startswith("#!/bin/bash\n")
    # The wrapper runs the jobscript and records its exit status under the job id.
    proc = subprocess.run([str(wrapper)], env={"PBS_JOBID": jobid, "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 3
    assert pbs.read_marker(jobid, state) == 3


def test_profile_queue_reads_the_profiles_queue():
    import yaml

    for profile, queue in (("cheyenne", "share"), ("derecho", "main"), ("casper", "casper")):
        settings = yaml.safe_load((ROOT / "profiles" / profile / "config.yaml").read_text())
        assert settings["executor"] == "pbs-pro" and settings["pbs-pro-queue"] == queue
    # Sites that keep cluster-generic + ncreel_pbs.py: the queue is in the submit command.
    cmd = "python3 workflow/scripts/ncreel_pbs.py submit --queue share"
    assert pbs.profile_queue(cmd, env={}) == "share"
    assert pbs.profile_queue(cmd, env={"SNAKEMAKE_PBS_PRO_QUEUE": "develop@desched1"}) == \
        "develop@desched1"
    assert pbs.profile_queue("python3 x.py submit", env={}) is None


def test_orphan_cancel_only_touches_this_workdirs_snakemake_jobs(tmp_path):
    other = tmp_path / "other"
    other.mkdir()

    def job(wd, args):
        return {"Variable_List": {"PBS_O_WORKDIR": str(wd)}, "Submit_arguments": args}

    listed = {"41.vm": job(tmp_path, f"-N x {tmp_path}/.snakemake/tmp.a/snakejob.a.1.sh"),
              "42[].vm": job(tmp_path, ".snakemake/pbs-pro/arrays/a.sh"),
              "43.vm": job(tmp_path, f"{tmp_path}/my_own_job.sh"),
              "44.vm": job(other, f"-N x {other}/.snakemake/tmp.b/snakejob.a.1.sh")}
    calls = []

    def run(cmd):
        calls.append(cmd)
        # qstat lists the jobs until they are deleted.
        return json.dumps({"Jobs": {} if len(calls) > 1 else listed})

    cancelled = []
    ids = pbs.cancel_orphan_pbs_jobs(tmp_path, run=run, cancel=cancelled.extend, poll=0)
    assert ids == cancelled == ["41.vm", "42[].vm"]
    assert calls == [["qstat", "-f", "-F", "json"]] * 2
    # Only the killed run's recorded jobs (another run is live here): a sub-job's id
    # selects its whole array.
    calls.clear()
    cancelled.clear()
    ids = pbs.cancel_orphan_pbs_jobs(tmp_path, run=run, cancel=cancelled.extend, poll=0,
                                     only={"42[3].vm", "44.vm"})
    assert ids == cancelled == ["42[].vm"]


def test_the_old_queue_variable_is_refused_not_ignored():
    """``$NCREEL_PBS_QUEUE`` chose the queue before the executor plugin took its own
    name; set now, it would be ignored without a word: one line names the new one."""
    assert pbs.old_queue_env_problem({}) is None
    msg = pbs.old_queue_env_problem({"NCREEL_PBS_QUEUE": "develop@desched1"})
    assert msg.startswith("NCREEL_PBS_QUEUE is no longer read: set "
                          "SNAKEMAKE_PBS_PRO_QUEUE=develop@desched1 instead")
    assert pbs.profile_queue("x --queue share", env={"NCREEL_PBS_QUEUE": "develop"}) == "share"
