"""Scheduler profiles: `make profiles`, named profiles as typed, login-node vs profile mode,
the Slurm account/partition check. Dry runs only (no scheduler needed)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT
from workflow_run import SMALL, make_workdir

pytestmark = pytest.mark.integration
PROFILES = ["slurm", "cheyenne", "derecho", "casper", "compute-node"]


@pytest.fixture(scope="module")
def repo(tmp_path_factory, sample_nc):
    """A copy of the repository (with its Makefile) standing in for a user's clone."""
    work = make_workdir(tmp_path_factory.mktemp("clone"))
    shutil.copy(ROOT / "Makefile", work / "Makefile")
    (work / "resources").mkdir()
    shutil.copy(sample_nc, work / "resources" / "A1B_north_america.nc")
    # The shard plan and process_shard's mem_mb come from the calibrate_render checkpoint;
    # run it (locally, as a user's first run would) so dry runs show every shard job.
    subprocess.run([sys.executable, "-m", "snakemake", "--cores", "2", "--config", *SMALL,
                    "--", "results/demo/calibration.json"], cwd=work, check=True,
                   capture_output=True)
    return work


def env(tmp_path, **extra):
    e = {k: v for k, v in os.environ.items()
         if k not in ("SNAKEMAKE_PROFILE", "SBATCH_ACCOUNT", "SBATCH_PARTITION", "PBS_ACCOUNT")}
    e.update(HOME=str(tmp_path / "home"), XDG_CONFIG_HOME=str(tmp_path / "xdg"),
             PATH=f"{Path(sys.executable).parent}:{e.get('PATH', '')}", **extra)
    return e


def dry_run(repo, e, *args):
    proc = subprocess.run([sys.executable, "-m", "snakemake", "-n", *args, "--config", *SMALL],
                          cwd=repo, capture_output=True, text=True, env=e)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return proc.stdout + proc.stderr


def test_make_profiles_then_named_profile_works(repo, tmp_path):
    e = env(tmp_path)
    proc = subprocess.run(["make", "-s", "profiles"], cwd=repo, env=e, capture_output=True,
                          text=True, check=True)
    linked = tmp_path / "xdg" / "snakemake"
    assert sorted(p.name for p in linked.iterdir()) == sorted(PROFILES)
    assert (linked / "cheyenne").resolve() == (repo / "profiles/cheyenne").resolve()
    assert "default" not in proc.stdout.split()
    # Idempotent.
    subprocess.run(["make", "-s", "profiles"], cwd=repo, env=e, check=True, capture_output=True)
    out = dry_run(repo, e, "--profile", "cheyenne")
    assert re.search(r"Using profiles? cheyenne", out) and "process_shard" in out
    # Without the link, the same command fails: the step is what makes it work.
    shutil.rmtree(linked)
    proc = subprocess.run([sys.executable, "-m", "snakemake", "-n", "--profile", "cheyenne"],
                          cwd=repo, capture_output=True, text=True, env=e)
    assert proc.returncode != 0


@pytest.mark.parametrize("profile", PROFILES)
def test_each_profile_dry_runs(profile, repo, tmp_path):
    out = dry_run(repo, env(tmp_path), "--profile", f"profiles/{profile}")
    assert "process_shard" in out


def _resources(out: str, rule: str) -> str:
    block = out[out.index(f"rule {rule}:"):]
    return re.search(r"resources: (.*)", block).group(1)


def test_login_node_mode_only_without_profile(repo, tmp_path):
    # Plain run: the workflow profile's login-node defaults apply (default-resources).
    plain = dry_run(repo, env(tmp_path), "--cores", "2")
    assert "runtime=30" in _resources(plain, "all")
    # With a profile, that profile's keys win: its Slurm account from SBATCH_ACCOUNT.
    out = dry_run(repo, env(tmp_path, SBATCH_ACCOUNT="proj01", SBATCH_PARTITION="cpu"),
                  "--profile", "profiles/slurm")
    res = _resources(out, "process_shard")
    assert "slurm_account=proj01" in res and "slurm_partition=cpu" in res
    # Unset: no account/partition is passed (sbatch's own defaults apply).
    res = _resources(dry_run(repo, env(tmp_path), "--profile", "profiles/slurm"), "process_shard")
    assert "slurm_account" not in res and "slurm_partition" not in res


def test_shard_memory_scales_with_attempt(repo, tmp_path):
    first = dry_run(repo, env(tmp_path), "--profile", "profiles/slurm")
    mem1 = int(re.search(r"mem_mb=(\d+)", _resources(first, "process_shard")).group(1))
    assert mem1 > 0
    # Snakemake evaluates the rule's mem_mb with `attempt`; the profiles retry twice.
    sys.path.insert(0, str(ROOT / "workflow"))
    from ncreel.config.settings import Calibration
    from ncreel.run import resources as res

    calibration = Calibration.from_json(repo / "results/demo/calibration.json")
    kw = {"ny": 37, "nx": 49, "n_frames": 60}
    assert res.render_mem_mb_calibrated(calibration, **kw, attempt=2) == \
        2 * res.render_mem_mb_calibrated(calibration, **kw, attempt=1)
    for name in PROFILES:
        text = (ROOT / f"profiles/{name}/config.yaml").read_text()
        assert re.search(r"^retries: [1-9]", text, re.M), name


def test_unset_slurm_account_stops_before_submitting(repo, tmp_path):
    """With SBATCH_* unset and a cluster without defaults, the run stops with one line."""
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "sacctmgr").write_text("#!/bin/sh\necho\n")
    (fake / "sinfo").write_text("#!/bin/sh\necho cpu\n")
    (fake / "sbatch").write_text("#!/bin/sh\necho sbatch must not be called >&2; exit 1\n")
    # The Slurm plugin refuses to load without a status command (sacct or squeue) on PATH;
    # fakes make the test independent of whether real Slurm client tools are installed.
    for tool in ("sacct", "squeue", "scontrol"):
        (fake / tool).write_text("#!/bin/sh\nexit 0\n")
    for f in fake.iterdir():
        f.chmod(0o755)
    e = env(tmp_path)
    e["PATH"] = f"{fake}:{e['PATH']}"
    proc = subprocess.run([sys.executable, "-m", "snakemake", "--profile", "profiles/slurm",
                           "--config", *SMALL], cwd=repo, capture_output=True, text=True, env=e)
    errors = [ln for ln in proc.stderr.splitlines() if ln.startswith("ncreel: error:")]
    assert proc.returncode != 0 and len(errors) == 1, proc.stderr[-3000:]
    assert "SBATCH_ACCOUNT" in errors[0] and "SBATCH_PARTITION" in errors[0]
    assert "sbatch must not be called" not in proc.stderr
