"""Why ``profiles/slurm`` keeps Slurm job arrays OFF (snakemake-executor-plugin-slurm 2.8).

Re-tested on the real Slurm with a bounded array (``--slurm-array-limit 10``) and WITHOUT
script mode (``--wrap``): every array task runs its own job's command, but tasks 2..N
run it from inside a Snakemake process started with task 1's command line
(``--target-jobs`` of task 1; only the payload differs). That outer process takes task
1's job as its own: it waits for task 1's outputs, fails the task with
MissingOutputException when task 1 is slower than ``--latency-wait``, would remove task
1's outputs as those of its failed job, and adds a second Snakemake process. The
task's failure does not even reach the main run, which reports its job finished.

This test states what arrays would need (every task COMPLETED, every task's log about
its own output only) and fails today, hence strict xfail: when a plugin release passes
it, pytest reports XPASS as a failure and arrays can be switched on in profiles/slurm.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from test_slurm import ACCOUNT, PARTITION, env, now
from test_slurm import slurm as slurm_cluster  # noqa: F401  (its `slurm` fixture)

pytestmark = [pytest.mark.slurm, pytest.mark.integration,
              pytest.mark.usefixtures("slurm_cluster")]

TWO = """
rule all:
    input: expand("out/{i}.txt", i=range(2))

rule t:
    output: "out/{i}.txt"
    threads: 1
    resources: mem_mb=400, runtime=5
    shell: "if [ {wildcards.i} = 0 ]; then sleep 15; fi; echo {wildcards.i} > {output}"
"""


@pytest.mark.xfail(strict=True, reason="plugin 2.8: array tasks 2..N run inside a Snakemake "
                   "process that owns task 1's job (waits for, and fails on, its outputs)")
def test_each_array_task_runs_only_its_own_job(tmp_path):
    (tmp_path / "Snakefile").write_text(TWO)
    since = now()
    proc = subprocess.run(
        [sys.executable, "-m", "snakemake", "--executor", "slurm", "--jobs", "10",
         "--slurm-array-jobs", "t", "--slurm-array-limit", "10",
         "--slurm-logdir", "logs/slurm", "--seconds-between-status-checks", "3",
         "--slurm-init-seconds-before-status-checks", "3", "--latency-wait", "3"],
        cwd=tmp_path, capture_output=True, text=True, timeout=600,
        env=env(SBATCH_ACCOUNT=ACCOUNT, SBATCH_PARTITION=PARTITION))
    assert proc.returncode == 0, proc.stderr[-3000:]
    (array,) = re.findall(r"SLURM job ID (\d+)\. The individual task IDs", proc.stderr)
    rows = subprocess.run(["sacct", "-j", array, "-X", "-n", "-P", "-S", since,
                           "-o", "JobID,State,ExitCode"], capture_output=True, text=True,
                          check=True).stdout.split()
    assert len(rows) == 2
    logs = {int(p.stem.split("_")[1]): p.read_text()
            for p in Path(tmp_path, "logs/slurm/rule_t").glob(f"{array}_*.log")}
    assert sorted(logs) == [1, 2]
    assert "out/0.txt" not in logs[2]  # task 2's log is about its own job only
    assert all(r.split("|")[1:] == ["COMPLETED", "0:0"] for r in rows), rows
