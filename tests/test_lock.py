"""The locked environments (envs/lock/) are what pyproject.toml asks for, what the conda
environments pin, and what this virtualenv has installed."""

from __future__ import annotations

import importlib.util
import re

import pytest
import tomllib
import yaml
from conftest import ROOT
from packaging.requirements import Requirement

spec = importlib.util.spec_from_file_location("ncreel_lock", ROOT / ".ci" / "lock.py")
lock = importlib.util.module_from_spec(spec)
spec.loader.exec_module(lock)

TEST_LOCK = ROOT / "envs" / "lock" / "test.txt"
WORKFLOW_LOCK = ROOT / "envs" / "lock" / "workflow.txt"


def _requirements(*extras: str) -> list[Requirement]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    reqs = list(project["dependencies"])
    for extra in extras:
        reqs += project["optional-dependencies"][extra]
    plugin = tomllib.loads(
        (ROOT / "workflow" / "executor-plugin-pbs-pro" / "pyproject.toml").read_text())
    return [Requirement(r) for r in reqs + plugin["project"]["dependencies"]]


@pytest.mark.parametrize(("path", "extras"), [(WORKFLOW_LOCK, ["workflow"]),
                                              (TEST_LOCK, ["workflow", "test", "docs", "bench"])])
def test_lock_satisfies_pyproject(path, extras):
    pins = lock.read_lock(path, environment=lock._ci_environment())
    for req in _requirements(*extras):
        name = lock.canonical(req.name)
        assert name in pins, f"{req} is not in {path.name}"
        assert req.specifier.contains(pins[name], prereleases=True), (str(req), pins[name])


def test_workflow_lock_is_the_test_lock_for_what_they_share():
    workflow = lock.read_lock(WORKFLOW_LOCK, environment=lock._ci_environment())
    test = lock.read_lock(TEST_LOCK, environment=lock._ci_environment())
    assert workflow.keys() <= test.keys()
    assert {n: v for n, v in workflow.items() if test[n] != v} == {}


@pytest.mark.parametrize("path", [WORKFLOW_LOCK, TEST_LOCK])
def test_every_pin_is_exact_and_hashed(path):
    entries = re.split(r"\n(?=[A-Za-z0-9])", path.read_text().split("\n", 2)[2])
    assert len(entries) > 50
    for entry in entries:
        head = entry.splitlines()[0]
        assert re.match(r"^[A-Za-z0-9._-]+==[^ ;]+( ;.*)? \\$", head), head
        assert "--hash=sha256:" in entry, head


def test_read_lock_keeps_the_lines_of_this_python(tmp_path):
    text = ("a==1.0 \\\n    --hash=sha256:00\nb==2.0 ; python_full_version < '3.0' \\\n"
            "    --hash=sha256:11\nb==3.0 ; python_full_version >= '3.0' \\\n"
            "    --hash=sha256:22\n    # via a\n")
    path = tmp_path / "x.txt"
    path.write_text("# header\n" + text)
    assert lock.read_lock(path) == {"a": "1.0", "b": "3.0"}


def test_conda_environments_pin_the_locked_versions():
    pins = lock.read_lock(TEST_LOCK, environment=lock._ci_environment())
    for env in sorted((ROOT / "envs").glob("*.yaml")):
        deps = yaml.safe_load(env.read_text())["dependencies"]
        checked = 0
        for dep in deps:
            name, _, version = dep.partition("==")
            pypi = lock.canonical(lock.CONDA_TO_PYPI.get(name, name))
            if pypi in pins:
                assert version == lock.conda_version(pins[pypi]), (env.name, dep, pins[pypi])
                checked += 1
            else:  # not a Python package of the lock: the interpreter, ffmpeg
                assert name.split("=")[0].split(">")[0] in ("python", "ffmpeg"), dep
        assert checked >= 1, env.name
    assert lock.conda_version("1.7.5.1.post1") == "1.7.5.1"


def test_this_virtualenv_is_exactly_the_test_lock():
    """`make test` installed envs/lock/test.txt, hash-checked: nothing more, nothing else."""
    assert lock.differences(TEST_LOCK) == []
