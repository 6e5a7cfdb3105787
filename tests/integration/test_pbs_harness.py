"""Snakemake's own executor-plugin harness against the REAL OpenPBS (``--executor pbs-pro``).

``snakemake.common.tests.TestWorkflowsLocalStorageBase`` runs Snakemake's ``simple`` and
``groups`` workflows (the acceptance test the Slurm, LSF and other executor plugins run in
their CI) through the Snakemake API with the executor under test: every job a PBS job. Its
rule ``c`` declares ``mem="5MB"``: it passes only because the executor adds the job's own
Snakemake process to each memory request. The array cases run the same workflows with
every rule's ready jobs sent as PBS job arrays (``qsub -J``).

``qsub``, ``qstat`` and ``qdel`` are PBS Pro's (``/opt/pbs/bin`` first on PATH). These
tests FAIL (never skip) when PBS is not up; as root, the session fixture starts it.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import snakemake.common.tests
from snakemake_executor_plugin_pbs_pro import ExecutorSettings
from snakemake_executor_plugin_pbs_pro.arrays import ARRAY_DIR
from test_pbs import pbs as pbs_server  # noqa: F401  (its `pbs` fixture)
from test_pbs import pbs_env

pytestmark = [pytest.mark.pbs, pytest.mark.integration]


@pytest.fixture(autouse=True)
def pbs_pro_commands(pbs_server, monkeypatch):  # noqa: F811
    """PBS Pro's commands first on PATH, in this process (the harness runs Snakemake
    in-process) and so in every job (``qsub -V``)."""
    for key, value in pbs_env().items():
        monkeypatch.setenv(key, value)


class TestWorkflows(snakemake.common.tests.TestWorkflowsLocalStorageBase):
    """``simple`` and ``groups``, one PBS job per Snakemake job (group jobs: one each)."""

    __test__ = True

    def get_executor(self) -> str:
        return "pbs-pro"

    def get_executor_settings(self) -> ExecutorSettings:
        return ExecutorSettings(queue="workq", no_account=True)


class TestWorkflowsArrays(TestWorkflows):
    """The same workflows with every rule an array rule: ready jobs of one rule with the
    same resources go out as ONE job array (``simple``'s two ``d`` jobs)."""

    def get_executor_settings(self) -> ExecutorSettings:
        return ExecutorSettings(queue="workq", no_account=True, array_rules="a,b,c,d",
                                array_limit=2)

    def run_workflow(self, test_name, tmp_path, deployment_method=frozenset()):
        super().run_workflow(test_name, tmp_path, deployment_method)
        manifests = list(Path(tmp_path, test_name, ARRAY_DIR).glob("*.json"))
        if test_name == "simple":  # rule d's two jobs: one array of two sub-jobs
            (manifest,) = manifests
            entries = json.loads(manifest.read_text())["jobs"]
            assert sorted(e["wildcards"]["somewildcard"] for e in entries) == [
                "somedir1", "somedir2/subdir"]
        else:  # group jobs are never arrays
            assert manifests == []
