"""The locked environments: write them from pyproject.toml (`make lock`), or read them.

Two lock files in ``envs/lock/``, in pip's requirements format with a sha256 hash for every
file of every release, installed with ``pip install --require-hashes --no-deps`` (plain
pip: a login node needs nothing else):

- ``workflow.txt``: what ``make venv`` and ``make demo`` install (ncreel's dependencies
  and its ``workflow`` extra);
- ``test.txt``: what ``make test``, ``make docs`` and ``make bench`` install (+ the
  ``test``, ``docs`` and ``bench`` extras), the same versions as ``workflow.txt`` for every
  package the two share (workflow.txt is resolved with test.txt as its constraints).

They are written by uv (``uv pip compile --universal``): one file for every Python that
``requires-python`` allows, on Linux, macOS and Windows, with environment markers where a
release differs. ``--fork-strategy fewest`` keeps one version of a package for all those
Pythons wherever one release serves them all, so a Python 3.12 on a cluster gets the
versions CI tested on 3.11. pip-tools cannot do that: it locks for the Python it runs on.

``envs/*.yaml`` (the rules' conda environments) carry the same versions; ``write`` rewrites
their pins, and ``tests/test_lock.py`` keeps them equal.

    python .ci/lock.py write [--upgrade]   # (re)write both locks and the conda pins
    python .ci/lock.py check LOCK          # does this Python's environment match LOCK?
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LOCK_DIR = ROOT / "envs" / "lock"
PLUGIN = "workflow/executor-plugin-pbs-pro/pyproject.toml"
#: Distributions a virtualenv has that no lock lists: the installer, and the two local
#: projects installed without their dependencies.
NOT_LOCKED = {"pip", "setuptools", "wheel", "ncreel", "snakemake-executor-plugin-pbs-pro"}
#: conda-forge package -> PyPI distribution, where the names differ.
CONDA_TO_PYPI = {"matplotlib-base": "matplotlib"}


def canonical(name: str) -> str:
    """PEP 503 normalised distribution name: ``cf_xarray`` -> ``cf-xarray``."""
    return re.sub(r"[-_.]+", "-", name).lower()


def read_lock(path: str | Path, *, environment: dict | None = None) -> dict[str, str]:
    """Return ``{distribution: version}`` of a lock file for one Python environment.

    Parameters
    ----------
    path : path
        A lock file (``name==version [; marker]`` lines, hash continuation lines).
    environment : dict, optional
        PEP 508 marker values; default: this interpreter's. Lines whose marker is false
        for it are left out (another Python's or platform's release).
    """
    from packaging.markers import Marker

    pins = {}
    for line in Path(path).read_text().splitlines():
        if not line or line[0] in " #-":
            continue
        req = line.rstrip(" \\")
        spec, _, marker = req.partition(";")
        name, _, version = spec.strip().partition("==")
        if marker.strip() and not Marker(marker.strip()).evaluate(environment):
            continue
        pins[canonical(name)] = version.strip()
    return pins


def installed() -> dict[str, str]:
    """``{distribution: version}`` of what this Python has installed."""
    from importlib.metadata import distributions

    return {canonical(d.metadata["Name"]): d.version for d in distributions()}


def differences(lock: str | Path) -> list[str]:
    """Return what this Python's environment has that the lock does not say, one line each."""
    want, have = read_lock(lock), installed()
    out = [f"{n}: {have.get(n, 'not installed')}, locked {v}" for n, v in sorted(want.items())
           if have.get(n) != v]
    out += [f"{n} {v}: installed, not in the lock" for n, v in sorted(have.items())
            if n not in want and n not in NOT_LOCKED]
    return out


def _uv() -> str:
    # uv is one of the test tools (pyproject.toml's test extra, so in the lock itself).
    uv = shutil.which("uv", path=str(Path(sys.executable).parent)) or shutil.which("uv")
    if uv is None:
        sys.exit("ncreel: error: uv is not installed: `make lock` installs the test tools "
                 "(envs/lock/test.txt) first")
    return uv


def _compile(out: Path, extras: list[str], upgrade: bool, constraint: Path | None) -> None:
    cmd = [_uv(), "pip", "compile", "pyproject.toml", PLUGIN, "--universal",
           "--python-version", _min_python(), "--fork-strategy", "fewest",
           "--generate-hashes", "--quiet", "--custom-compile-command", "make lock",
           "-o", str(out.relative_to(ROOT))]
    cmd += [a for e in extras for a in ("--extra", e)]
    if upgrade:
        cmd.append("--upgrade")
    if constraint is not None:
        cmd += ["--constraint", str(constraint.relative_to(ROOT))]
    subprocess.run(cmd, cwd=ROOT, check=True)


def _min_python() -> str:
    text = (ROOT / "pyproject.toml").read_text()
    return re.search(r'^requires-python = ">=(\d+\.\d+)"', text, re.M).group(1)


def pin_conda_envs(lock: Path) -> list[Path]:
    """Set every Python package of ``envs/*.yaml`` to its locked version; return those changed."""
    pins = {n: conda_version(v) for n, v in read_lock(lock, environment=_ci_environment()).items()}
    changed = []
    for env in sorted((ROOT / "envs").glob("*.yaml")):
        text = env.read_text()

        def pin(m: re.Match) -> str:
            name = m.group(2)
            pypi = canonical(CONDA_TO_PYPI.get(name, name))
            if pypi not in pins:
                return m.group(0)
            return f"{m.group(1)}{name}=={pins[pypi]}"

        new = re.sub(r"^(\s+- )([A-Za-z0-9_.-]+)\s*[=<>!~][^\s#]*", pin, text, flags=re.M)
        if new != text:
            env.write_text(new)
            changed.append(env)
    return changed


def conda_version(version: str) -> str:
    """Return the conda-forge version of a PyPI release: without ``.postN`` (a re-upload)."""
    from packaging.version import Version

    v = Version(version)
    return v.base_version if v.is_postrelease else version


def _ci_environment() -> dict:
    """PEP 508 marker values of CI's Python (Linux x86_64, the lowest Python allowed)."""
    from packaging.markers import default_environment

    env = default_environment()
    v = _min_python()
    env.update(python_version=v, python_full_version=f"{v}.0", sys_platform="linux",
               platform_system="Linux", platform_machine="x86_64", os_name="posix",
               implementation_name="cpython", platform_python_implementation="CPython")
    return env


def main(argv: list[str] | None = None) -> int:
    """Command line: ``write [--upgrade]`` or ``check LOCK``."""
    parser = argparse.ArgumentParser(prog="python .ci/lock.py", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    w = sub.add_parser("write", help="write envs/lock/*.txt and the envs/*.yaml pins")
    w.add_argument("--upgrade", action="store_true",
                   help="the newest releases pyproject.toml allows (else: keep what is locked)")
    c = sub.add_parser("check", help="exit 1, listing them, when this environment differs")
    c.add_argument("lock")
    args = parser.parse_args(argv)
    if args.command == "check":
        diff = differences(args.lock)
        for line in diff:
            print(f"ncreel: {line}")
        print(f"ncreel: {'differs from' if diff else 'matches'} {args.lock}")
        return 1 if diff else 0
    LOCK_DIR.mkdir(parents=True, exist_ok=True)
    test, workflow = LOCK_DIR / "test.txt", LOCK_DIR / "workflow.txt"
    _compile(test, ["workflow", "test", "docs", "bench"], args.upgrade, None)
    _compile(workflow, ["workflow"], False, test)
    for env in pin_conda_envs(test):
        print(f"ncreel: pinned {env.relative_to(ROOT)}")
    print(f"ncreel: wrote {test.relative_to(ROOT)} and {workflow.relative_to(ROOT)}; "
          "`make test` on them is how they are accepted")
    return 0


if __name__ == "__main__":
    sys.exit(main())
