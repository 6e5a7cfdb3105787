"""ncreel.cluster runs on a login node with the standard library only.

The PBS submit/status helper and the run lock run under whatever ``python3`` a login or
compute node has, outside the workflow's environment. These tests import every module of
``ncreel.cluster`` with the system ``python3 -I -S`` (no site-packages, no user site, no
PYTHONPATH), the package directory put on ``sys.path`` explicitly, and run the CLIs.
"""

import shutil
import subprocess
from pathlib import Path

from conftest import ROOT

WORKFLOW = ROOT / "workflow"
#: The PBS Pro executor plugin, whose standard-library modules ncreel.cluster.pbs imports.
PLUGIN = WORKFLOW / "executor-plugin-pbs-pro"
CLUSTER_MODULES = sorted(
    f"ncreel.cluster.{p.stem}" for p in (WORKFLOW / "ncreel" / "cluster").glob("*.py")
    if p.stem != "__init__")


def bare_python() -> list[str]:
    """The system python3 with no site-packages at all (``-S``) and isolated (``-I``)."""
    exe = "/usr/bin/python3" if Path("/usr/bin/python3").exists() else shutil.which("python3")
    assert exe, "python3 is not installed"
    return [exe, "-I", "-S"]


def run_bare(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([*bare_python(), "-c", f"import sys; sys.path[:0] = "
                           f"{[str(WORKFLOW), str(PLUGIN)]!r}; {code}"], capture_output=True,
                          text=True, cwd="/", timeout=60)


def test_bare_python_has_no_third_party_packages():
    # What makes the next test mean something: numpy (installed for the project) is out of reach.
    proc = run_bare("import numpy")
    assert proc.returncode != 0 and "No module named 'numpy'" in proc.stderr


def test_cluster_modules_import_with_the_standard_library_only():
    assert {"ncreel.cluster.pbs", "ncreel.cluster.slurm", "ncreel.cluster.runlock",
            "ncreel.cluster.runstatus"} <= set(CLUSTER_MODULES)
    proc = run_bare(
        f"import importlib; [importlib.import_module(m) for m in {CLUSTER_MODULES!r}]; "
        "print(' '.join(sorted({m.split('.')[0] for m in sys.modules} "
        "- set(sys.stdlib_module_names) - set(sys.builtin_module_names) - {'__main__'})))")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["ncreel", "snakemake_executor_plugin_pbs_pro"]


def test_login_node_clis_run_under_bare_python3():
    pbs = subprocess.run([*bare_python(), str(WORKFLOW / "scripts" / "ncreel_pbs.py"),
                          "--help"], capture_output=True, text=True, cwd="/", timeout=60)
    assert pbs.returncode == 0, pbs.stderr
    assert "submit" in pbs.stdout and "status" in pbs.stdout
    status = run_bare("sys.argv = ['runstatus', '--help']; import runpy; "
                      "runpy.run_module('ncreel.cluster.runstatus', run_name='__main__')")
    assert status.returncode == 0, status.stderr
    assert "--run" in status.stdout
