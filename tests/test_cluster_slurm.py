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
    assert slurm_env_problem({"USER": "jdoe", "SBATCH_ACCOUNT": "a", "SBATCH_PARTITION": "p"},
                             run=run) is None
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
