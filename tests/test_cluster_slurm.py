"""Checks of the Slurm environment and cancelling a dead run's jobs (``ncreel.cluster.slurm``).

Whole runs through the Slurm profile are in ``tests/integration/test_slurm.py`` and
``tests/integration/test_profiles.py``.
"""

from ncreel.cluster.slurm import cancel_orphan_slurm_jobs, slurm_env_problem


def test_slurm_env_problem_messages():
    none_default = {("sacctmgr",): "\n", ("sinfo",): "cpu\ngpu\n"}

    def run(cmd):
        return none_default.get((cmd[0],))

    msg = slurm_env_problem({"USER": "jdoe"}, run=run)
    assert "export SBATCH_ACCOUNT=" in msg and "export SBATCH_PARTITION=<one of: cpu, gpu>" in msg
    assert slurm_env_problem({"USER": "jdoe", "SBATCH_ACCOUNT": "a", "SBATCH_PARTITION": "cpu"},
                             run=run) is None
    assert slurm_env_problem({"USER": "j", "SBATCH_ACCOUNT": "a", "SBATCH_PARTITION": "gpu,cpu"},
                             run=run) is None
    # An unknown partition (odd text too) is one line before any job; sinfo's default
    # mark is not part of a name.
    msg = slurm_env_problem({"USER": "j", "SBATCH_ACCOUNT": "a",
                             "SBATCH_PARTITION": "cpu,debug$(id)"}, run=run)
    assert msg == ("SBATCH_PARTITION names 'debug$(id)', which is not a partition of this "
                   "cluster: export SBATCH_PARTITION=<one of: cpu, gpu>")
    assert slurm_env_problem({"USER": "j", "SBATCH_PARTITION": "debug"},
                             run=lambda c: "acct\n" if c[0] == "sacctmgr" else "debug*\n") is None
    # Defaults exist: nothing to complain about. No accounting at all: no account needed.
    assert slurm_env_problem({"USER": "j"}, run=lambda c: "acct\n" if c[0] == "sacctmgr"
                             else "debug*\n") is None
    assert slurm_env_problem({"USER": "j"}, run=lambda c: None) is None


def test_orphan_cancel_only_touches_this_workdirs_snakemake_jobs(tmp_path):
    other = tmp_path / "other"
    other.mkdir()
    squeue = (f"41|{tmp_path}|rule_process_shard_wildcards_00001\n"
              f"42_3|{tmp_path}|rule_process_shard_wildcards_00002\n"
              f"43|{tmp_path}|(null)\n"
              f"44|{other}|rule_process_shard_wildcards_00001\n")
    cancelled = []
    ids = cancel_orphan_slurm_jobs(tmp_path, run=lambda c: squeue, cancel=cancelled.extend)
    assert ids == cancelled == ["41", "42_3"]


def test_a_cancelled_job_is_seen_as_cancelled_by_the_slurm_plugin():
    """sacct says ``CANCELLED by 0`` for a job ended with scancel; the Slurm plugin's own
    status query (run here on that text) then has a state it waits on for ever, unless
    wrapped to keep the state's first word."""
    import asyncio
    import logging
    from types import SimpleNamespace

    import snakemake_executor_plugin_slurm as plugin
    from ncreel.cluster.slurm import see_cancelled_jobs

    sacct = "printf '298|CANCELLED by 0\\n299|COMPLETED\\n300|TIMEOUT\\n'"
    log = logging.getLogger("test")
    raw, _ = asyncio.run(plugin.query_job_status(sacct, log))
    assert raw["298"] == "CANCELLED by 0"  # not one of the plugin's failure states
    ns = SimpleNamespace(query_job_status=plugin.query_job_status)
    assert see_cancelled_jobs(ns) and see_cancelled_jobs(ns)  # once; again is a no-op
    status, _ = asyncio.run(ns.query_job_status(sacct, log))
    assert status == {"298": "CANCELLED", "299": "COMPLETED", "300": "TIMEOUT"}
    assert see_cancelled_jobs(SimpleNamespace()) is False
