"""The PBS Pro executor plugin as its own wheel, in a virtualenv with Snakemake only.

Builds ``snakemake_executor_plugin_pbs_pro-*.whl`` from ``workflow/executor-plugin-pbs-pro``,
installs it and Snakemake (from the package index) into a new virtualenv outside the
repository, with no ncreel in it, and runs a three-rule workflow with ``--executor pbs-pro``
on the REAL OpenPBS server. Fails (never skips) when PBS is not up.
"""

from __future__ import annotations

import importlib.metadata
import os
import shutil
import subprocess
import sys

import pytest
from conftest import PLUGIN, ROOT
from test_pbs import PBS_BIN, wait_finished
from test_pbs import pbs as pbs_server  # noqa: F401  (its `pbs` fixture)

pytestmark = [pytest.mark.pbs, pytest.mark.integration]

THREE_RULES = """
rule all:
    input: "c.txt"

rule a:
    output: "a.txt"
    resources: mem_mb=20, runtime=2
    shell: "echo a > {output}"

rule b:
    input: "a.txt"
    output: "b.txt"
    resources: mem="5MB", runtime=2
    shell: "cat {input} > {output}; echo b >> {output}"

rule c:
    input: "b.txt"
    output: "c.txt"
    threads: 2
    shell: "cat {input} > {output}; echo c >> {output}"
"""


def test_plugin_wheel_runs_a_workflow_without_ncreel(pbs_server, tmp_path):  # noqa: F811
    src = tmp_path / "src"
    shutil.copytree(PLUGIN, src, ignore=shutil.ignore_patterns(
        "__pycache__", "*.egg-info", "build", "dist"))
    dist = tmp_path / "dist"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(dist),
                    str(src)], check=True, capture_output=True, timeout=600)
    [wheel] = dist.glob("snakemake_executor_plugin_pbs_pro-*-py3-none-any.whl")
    venv = tmp_path / "venv"
    # The tests' PYTHONPATH holds the checkout's plugin directory; pip in the new
    # virtualenv would take a build's metadata there for an installed plugin and skip it.
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "PBS_ACCOUNT", "SNAKEMAKE_PBS_PRO_QUEUE", "SNAKEMAKE_PROFILE",
                        "VIRTUAL_ENV")}
    env["PATH"] = f"{PBS_BIN}:{venv / 'bin'}:{env.get('PATH', '')}"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True,
                   capture_output=True, timeout=300, env=env)
    py = venv / "bin" / "python"
    snakemake = f"snakemake=={importlib.metadata.version('snakemake')}"
    subprocess.run([str(py), "-m", "pip", "install", "-q", "--progress-bar", "off",
                    str(wheel), snakemake], check=True, capture_output=True, timeout=900,
                   env=env)
    listed = subprocess.run([str(py), "-m", "pip", "list"], env=env, capture_output=True,
                            text=True, check=True).stdout
    assert "snakemake-executor-plugin-pbs-pro" in listed, listed
    # Nothing of ncreel or of this checkout is importable there.
    probe = subprocess.run([str(py), "-c", "import ncreel"], env=env, cwd=tmp_path,
                           capture_output=True, text=True)
    assert probe.returncode != 0 and "No module named 'ncreel'" in probe.stderr
    work = tmp_path / "work"
    work.mkdir()
    (work / "Snakefile").write_text(THREE_RULES)
    proc = subprocess.run([str(venv / "bin" / "snakemake"), "--executor", "pbs-pro",
                           "--pbs-pro-queue", "workq", "--pbs-pro-no-account", "-j", "3",
                           "--seconds-between-status-checks", "2", "--latency-wait", "5"],
                          cwd=work, env=env, capture_output=True, text=True, timeout=900)
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0, log[-4000:]
    assert (work / "c.txt").read_text() == "a\nb\nc\n"
    ids = [line.split("external jobid '")[1].split("'")[0]
           for line in log.splitlines() if "external jobid '" in line]
    assert len(ids) == 3, log[-3000:]
    jobs = wait_finished(*ids)
    mem = sorted(jobs[i]["Resource_List"]["mem"] for i in ids)
    # The 1000 MB default plus the job's own Snakemake (300); mem_mb 20 and mem 5MB get
    # at least that Snakemake too (a command it starts counts as its copy): 600 each.
    assert mem == ["1300mb", "600mb", "600mb"], mem
    assert all(jobs[i]["Exit_status"] == 0 for i in ids)
    assert str(ROOT) not in log
