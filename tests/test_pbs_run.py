"""The pbs-pro executor's run state (:class:`snakemake_executor_plugin_pbs_pro.run.PbsRun`):
journal replay, batching into arrays, re-attaching to a killed run's jobs, polls that keep
failing, cancellation through the injected runner. No root and no PBS server: ``qstat``
answers are RECORDED on the CI machine's OpenPBS 23.06.06 (tests/data/qstat_pbspro_arrays/).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from snakemake_executor_plugin_pbs_pro.executor import ExecutorSettings
from snakemake_executor_plugin_pbs_pro.journal import Journal
from snakemake_executor_plugin_pbs_pro.run import PbsRun, RunStopped, SettingsError
from snakemake_executor_plugin_pbs_pro.state import write_marker
from test_cluster_pbs import FakeQstat
from test_snakemake_executor_plugin_pbs_pro import RECORDED


class Job:
    """What the run reads of a Snakemake job: its outputs (and a rule for batching)."""

    def __init__(self, *output, rule="r", key=None):
        self.output, self.rule, self.key = list(output), rule, key

    def __repr__(self):
        return f"Job{tuple(self.output)}"


def make_run(tmp_path, runner=None, **settings):
    return PbsRun(ExecutorSettings(**{"no_account": True, **settings}),
                  runner=runner or FakeQstat([]), state_dir=tmp_path, environ={},
                  check_commands=False)


def write_journal(tmp_path, lines):
    tmp_path.mkdir(parents=True, exist_ok=True)
    (tmp_path / "journal.jsonl").write_text("".join(
        (json.dumps(x) if isinstance(x, dict) else x) + "\n" for x in lines))


def test_journal_replay_finds_the_killed_runs_open_jobs_and_servers(tmp_path):
    """Submitted and never ended = the killed run's; an ended one is not; a line cut
    short by the kill and a non-object line are skipped; servers come from the ids."""
    write_journal(tmp_path, [
        {"submit": "1.vm", "outputs": ["b", "a"]},
        {"submit": "2.casper-pbs", "outputs": ["c"]},
        {"end": "2.casper-pbs"},
        {"submit": "3[0].vm", "outputs": ["d"]},
        "[1, 2]",
        '{"submit": "4.vm", "outp'])
    run = make_run(tmp_path)
    assert run.killed_runs_jobs == {("a", "b"): "1.vm", ("d",): "3[0].vm"}
    assert Journal(tmp_path / "journal.jsonl").servers() == ["vm", "casper-pbs"]
    assert make_run(tmp_path / "none").killed_runs_jobs == {}


def test_ready_jobs_are_batched_by_key_and_cut_at_the_array_limit(tmp_path):
    run = make_run(tmp_path, array_limit=2)
    jobs = [Job("p1"), Job("s1", key="k"), Job("s2", key="k"), Job("t1", key="t"),
            Job("s3", key="k"), Job("p2")]
    got = run.batches(jobs, lambda job: job.key)
    assert [[j.output[0] for j in b] for b in got] == [
        ["p1"], ["p2"], ["s1", "s2"], ["s3"], ["t1"]]


@pytest.mark.parametrize("bad, msg", [({"array_limit": 1}, "at least 2"),
                                      ({"job_overhead_mb": -5}, "0 or more"),
                                      ({"log_dir": "../x"}, "leads out of the working")])
def test_settings_that_cannot_work_are_refused_at_start(tmp_path, bad, msg):
    with pytest.raises(SettingsError, match=msg):
        make_run(tmp_path, **bad)


def test_missing_account_is_said_once_not_raised(tmp_path):
    run = PbsRun(ExecutorSettings(), runner=FakeQstat([]), state_dir=tmp_path, environ={},
                 check_commands=False)
    assert run.account is None
    assert run.account_problem.startswith("pbs-pro: error: PBS_ACCOUNT is unset")
    run = PbsRun(ExecutorSettings(queue="casper@srv"), runner=FakeQstat([]),
                 state_dir=tmp_path, environ={"PBS_ACCOUNT": "UABC0001"},
                 check_commands=False)
    assert (run.account, run.queue, run.account_problem) == ("UABC0001", "casper@srv", None)


def test_the_queue_variable_is_snakemakes_name_for_the_setting(monkeypatch):
    """``$SNAKEMAKE_PBS_PRO_QUEUE`` sets ``pbs-pro-queue`` through Snakemake's own
    command-line parser (configargparse: it overrides a profile, the command line
    overrides it); the old ``$NCREEL_PBS_QUEUE`` sets nothing."""
    import configargparse
    from snakemake_interface_executor_plugins.registry import ExecutorPluginRegistry

    plugin = ExecutorPluginRegistry().get_plugin("pbs-pro")
    monkeypatch.setenv("NCREEL_PBS_QUEUE", "old")
    monkeypatch.setenv("SNAKEMAKE_PBS_PRO_QUEUE", "casper@srv")
    parser = configargparse.ArgumentParser()
    plugin.register_cli_args(parser, "executor")
    assert plugin.get_settings(parser.parse_args([])).queue == "casper@srv"
    assert plugin.get_settings(parser.parse_args(["--pbs-pro-queue", "x"])).queue == "x"
    monkeypatch.delenv("SNAKEMAKE_PBS_PRO_QUEUE")
    parser = configargparse.ArgumentParser()
    plugin.register_cli_args(parser, "executor")
    assert plugin.get_settings(parser.parse_args([])).queue is None


def test_a_run_of_the_previous_version_is_resumed_from_its_journal(tmp_path):
    """Version 0.1 kept its journal and the exit statuses its job wrappers record in
    .snakemake/ncreel-pbs/: a run it left is still taken over from there (its jobs'
    wrappers keep writing there), and the end is written to the new journal only."""
    old, new = tmp_path / "ncreel-pbs", tmp_path / "pbs-pro"
    write_journal(old, [{"submit": "1.vm", "outputs": ["a"]},
                        {"submit": "2.vm", "outputs": ["b"]}, {"end": "2.vm"}])
    write_marker("1.vm", 0, old)
    run = make_run(new, qstat_attempts=1)
    assert run.killed_runs_jobs == {("a",): "1.vm"}
    assert run.poll(["1.vm"]) == {"1.vm": "success"}  # qstat down: the old marker decides
    assert make_run(new).killed_runs_jobs == {}
    assert (old / "journal.jsonl").read_text().count("\n") == 3
    assert make_run(tmp_path / "elsewhere").killed_runs_jobs == {}


def test_killed_runs_jobs_are_taken_over_when_running_or_done_with_outputs(tmp_path):
    """One qstat for all recorded jobs: running (18[2]) and success with outputs (18[0])
    are taken over; success without outputs (99999, recorded exit 0), a memory kill
    (18[1]) and a failure (19) are submitted again, and closed in the journal; a job the
    killed run never submitted is submitted without asking."""
    done = tmp_path / "done.txt"
    done.write_text("x")
    write_journal(tmp_path, [{"submit": i, "outputs": [o]} for i, o in [
        ("18[0].vm", str(done)), ("18[1].vm", "o1"), ("18[2].vm", "o2"), ("19.vm", "o3"),
        ("99999.vm", "o4")]])
    write_marker("99999.vm", 0, tmp_path)
    runner = FakeQstat([RECORDED])
    run = make_run(tmp_path, runner=runner)
    jobs = [Job(str(done)), Job("o1"), Job("o2"), Job("o3"), Job("o4"), Job("new")]
    taken, rest = run.take_over(jobs)
    assert len(runner.calls) == 1 and runner.calls[0][:4] == ["qstat", "-x", "-f", "-t"]
    assert taken == {jobs[0]: "18[0].vm", jobs[2]: "18[2].vm"}
    assert rest == [jobs[1], jobs[3], jobs[4], jobs[5]]
    assert make_run(tmp_path).killed_runs_jobs == {(str(done),): "18[0].vm",
                                                    ("o2",): "18[2].vm"}
    again = Job("o2")  # asked about once per run
    assert run.take_over([again]) == ({}, [again]) and len(runner.calls) == 1


def test_poll_keeps_jobs_running_then_stops_after_the_set_number_of_failed_polls(tmp_path):
    """qstat failing every try: the recorded exit status decides (19: 3 -> failed), other
    jobs stay running; the third failed poll in a row stops the run with one line; a
    poll that answers resets the count and closes finished jobs in the journal."""
    write_marker("19.vm", 3, tmp_path)
    runner = FakeQstat([])
    run = make_run(tmp_path, runner=runner, qstat_attempts=1, qstat_failed_polls=3)
    ids = ["18[2].vm", "19.vm"]
    assert run.poll(ids) == {"18[2].vm": "running", "19.vm": "failed"}
    assert run.failed_polls == 1
    runner.results.append(RECORDED)
    assert run.poll(ids) == {"18[2].vm": "running", "19.vm": "failed"}
    assert run.failed_polls == 0
    run.poll(ids), run.poll(ids)
    with pytest.raises(RunStopped) as err:
        run.poll(ids)
    msg = str(err.value)
    assert msg.startswith("pbs-pro: error: cannot follow the run's PBS jobs:")
    assert "(3 polls in a row)" in msg and "18[2].vm, 19.vm" in msg and "\n" not in msg
    ended = [r["end"] for r in Journal(tmp_path / "journal.jsonl").records() if "end" in r]
    assert ended == ["19.vm", "19.vm", "19.vm", "19.vm"]


def test_poll_stops_at_once_when_qstat_is_not_pbs_pros(tmp_path):
    unsupported = (2, "", "Unknown option: x\nUsage: qstat [-f] ...\n")
    runner = FakeQstat([unsupported])
    with pytest.raises(RunStopped, match=r"rejects `qstat -x -f -t`"):
        make_run(tmp_path, runner=runner).poll(["7.vm"])
    assert len(runner.calls) == 1


def test_cancel_deletes_through_the_runner_arrays_once_100_ids_a_call(tmp_path):
    calls = []

    def runner(cmd, timeout=60):
        calls.append(cmd)
        return subprocess.CompletedProcess(cmd, 0, "", "")

    run = make_run(tmp_path, runner=runner)
    ids = [f"{n}.vm" for n in range(150)] + ["7[0].vm", "7[1].vm", ""]
    run.cancel(ids)
    assert [c[0] for c in calls] == ["qdel", "qdel"]
    assert calls[0][1:] == [f"{n}.vm" for n in range(100)]
    assert calls[1][1:] == [f"{n}.vm" for n in range(100, 150)] + ["7[].vm"]
    ended = {r["end"] for r in Journal(tmp_path / "journal.jsonl").records()}
    assert ended == set(ids) - {""}


ENDINGS = Path(__file__).parent / "data" / "qstat_pbspro_endings"


def test_a_deleted_job_is_told_from_walltime_and_memory_kills(tmp_path):
    """Recorded on the real OpenPBS (tests/data/qstat_pbspro_endings/): a running job
    deleted with qdel (substate 91, Exit_status 143, "terminated by root@localhost") and a
    held one (substate 91, no exit status) are ``deleted``, saying by whom; walltime
    (-29) and memory (-27) kills stay ``failed`` (retriable); a deleted array sub-job is
    ``deleted`` while its siblings run. With ``retry-deleted`` they are ``failed``."""
    text = (ENDINGS / "qdel_running_walltime_mem_qdel_queued.txt").read_text()
    ids = ["4000.vm", "4001.vm", "4002.vm", "4003.vm"]
    run = make_run(tmp_path, runner=FakeQstat([(0, text, "")]))
    assert run.poll(ids) == {"4000.vm": "deleted", "4001.vm": "failed",
                             "4002.vm": "failed", "4003.vm": "deleted"}
    assert run.deleted == {"4000.vm": "deleted with qdel by root@localhost",
                           "4003.vm": "deleted with qdel before it started"}
    old = make_run(tmp_path / "old", runner=FakeQstat([(0, text, "")]), retry_deleted=True)
    assert set(old.poll(ids).values()) == {"failed"} and old.deleted == {}
    array = (ENDINGS / "array_subjob_0_deleted_running.txt").read_text()
    run = make_run(tmp_path / "a", runner=FakeQstat([(0, array, "")]))
    assert run.poll(["4004[0].vm", "4004[1].vm"]) == {"4004[0].vm": "deleted",
                                                       "4004[1].vm": "running"}


def test_the_next_attempt_of_a_deleted_job_is_refused_in_one_line(tmp_path):
    """After a poll saw a job deleted, its next attempt (same outputs) is refused with one
    line naming the PBS job and who deleted it; other jobs are not."""
    text = (ENDINGS / "qdel_running_walltime_mem_qdel_queued.txt").read_text()
    run = make_run(tmp_path, runner=FakeQstat([(0, text, "")]))
    run.poll(["4000.vm", "4001.vm"])
    said = run.deleted_message("4000.vm", "rule process_shard, job 7", ("a.copy",))
    assert said == ("pbs-pro: PBS job 4000.vm (rule process_shard, job 7) was deleted with "
                    "qdel by root@localhost; it is not resubmitted.")
    line = run.refusal(("a.copy",), "rule process_shard, job 7")
    assert line.startswith("pbs-pro: error: not resubmitting rule process_shard, job 7: its "
                           "PBS job 4000.vm was deleted with qdel by root@localhost.")
    assert "\n" not in line
    assert run.refusal(("b.copy",), "rule process_shard, job 8") is None
