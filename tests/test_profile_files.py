"""The PBS Pro profiles: written from one shared base, and agreeing where they must.

Snakemake profiles cannot include one another, so profiles/generate.py writes each PBS
site's config.yaml from its site.yaml and profiles/pbs-common.yaml; the whole-workflow
dry runs of every profile are in tests/integration/test_profiles.py.
"""

from __future__ import annotations

import importlib.util
import shutil

import pytest
import yte
from conftest import ROOT

PROFILES = ROOT / "profiles"
PBS = ("casper", "cheyenne", "derecho")


def generator():
    spec = importlib.util.spec_from_file_location("generate", PROFILES / "generate.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def settings(path) -> dict:
    """A profile's settings as Snakemake reads them (YTE templates rendered)."""
    return yte.process_yaml(path.read_text(), require_use_yte=True)


def test_committed_pbs_profiles_are_the_generated_ones(capsys):
    assert generator().SITES == PBS
    assert generator().main(["--check"]) == 0, capsys.readouterr().out


def test_check_names_a_profile_edited_by_hand(tmp_path, capsys):
    root = tmp_path / "profiles"
    shutil.copytree(PROFILES, root)
    gen = generator()
    assert gen.main(["--check"], root) == 0
    path = root / "cheyenne" / "config.yaml"
    path.write_text(path.read_text().replace("retries: 2", "retries: 5"))
    assert gen.main(["--check"], root) == 1
    assert f"out of step: {path}" in capsys.readouterr().out
    assert gen.main([], root) == 0 and "retries: 2" in path.read_text()


@pytest.mark.parametrize("site", PBS)
def test_each_pbs_profile_has_every_shared_setting(site):
    common = settings(PROFILES / "pbs-common.yaml")
    mine = settings(PROFILES / site / "config.yaml")
    assert common["executor"] == "pbs-pro"
    assert {k: mine[k] for k in common} == common
    # A site sets where and how long, never the shared settings.
    assert not set(settings(PROFILES / site / "site.yaml")) & set(common)


def test_casper_and_cheyenne_differ_only_in_queue_and_walltime():
    casper = settings(PROFILES / "casper" / "config.yaml")
    cheyenne = settings(PROFILES / "cheyenne" / "config.yaml")
    differ = {k for k in casper.keys() | cheyenne.keys() if casper.get(k) != cheyenne.get(k)}
    assert differ == {"pbs-pro-queue", "pbs-pro-max-walltime"}


def test_every_scheduler_profile_declares_the_same_defaults():
    """A job that declares nothing gets the same mem, walltime and scratch everywhere."""
    names = [*PBS, "slurm", "compute-node"]
    defaults = {n: settings(PROFILES / n / "config.yaml")["default-resources"] for n in names}
    for name, got in defaults.items():
        assert {k: got[k] for k in ("mem_mb", "runtime", "disk_mb")} == \
            {"mem_mb": 1000, "runtime": 30, "disk_mb": 1000}, name
