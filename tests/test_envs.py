"""Each rule's conda env lists exactly what its script imports, and pyproject.toml has it too.

The imports are found statically: the rule's script, then every ncreel module it imports,
transitively (imports inside functions count: they run in the same job). An import inside
``try: ... except ImportError`` is optional (a fallback) and need not be listed.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import tomllib
import yaml
from conftest import ROOT
from workflow_run import make_workdir

WORKFLOW = ROOT / "workflow"
#: Import name -> (conda-forge package, PyPI distribution).
PACKAGES = {
    "antimeridian": ("antimeridian", "antimeridian"),
    "cartopy": ("cartopy", "cartopy"),
    "cf_xarray": ("cf_xarray", "cf_xarray"),
    "cftime": ("cftime", "cftime"),
    "contourpy": ("contourpy", "contourpy"),
    "healpix": ("healpix", "healpix"),
    "imageio_ffmpeg": ("imageio-ffmpeg", "imageio-ffmpeg"),
    "intake_esm": ("intake-esm", "intake-esm"),
    "matplotlib": ("matplotlib-base", "matplotlib"),
    "netCDF4": ("netcdf4", "netcdf4"),
    "numpy": ("numpy", "numpy"),
    "PIL": ("pillow", "pillow"),
    "pint": ("pint", "pint"),
    "polars": ("polars", "polars"),
    "psycopg": ("psycopg", "psycopg"),
    "pyproj": ("pyproj", "pyproj"),
    "scipy": ("scipy", "scipy"),
    "shapefile": ("pyshp", "pyshp"),
    "shapely": ("shapely", "shapely"),
    "uxarray": ("uxarray", "uxarray"),
    "xarray": ("xarray", "xarray"),
    "yaml": ("pyyaml", "pyyaml"),
    "zarr": ("zarr", "zarr"),
    "zstandard": ("zstandard", "zstandard"),
}
#: Programs an env provides besides Python packages, and the ncreel module that runs them.
PROGRAMS = {"ffmpeg": "ncreel.render.movie"}


def _name(spec: str) -> str:
    return re.split(r"[<>=!\[ ;]", spec, maxsplit=1)[0].lower()


def module_file(module: str) -> Path | None:
    """The file of an ncreel module under workflow/, or None for anything else."""
    parts = module.split(".")
    if parts[0] != "ncreel":
        return None
    base = WORKFLOW.joinpath(*parts)
    for path in (base.with_suffix(".py"), base / "__init__.py"):
        if path.is_file():
            return path
    return None


def _optional_nodes(tree: ast.AST) -> set[int]:
    """ids of import nodes inside a try whose handlers catch ImportError."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Try) and any(
                h.type is not None and "ImportError" in ast.unparse(h.type)
                or h.type is not None and "ModuleNotFoundError" in ast.unparse(h.type)
                for h in node.handlers):
            for stmt in node.body:
                out |= {id(n) for n in ast.walk(stmt)}
    return out


def imports_of(path: Path, package: str | None = None):
    """Yield (module, optional) for every import in one file (relative ones resolved)."""
    tree = ast.parse(path.read_text())
    optional = _optional_nodes(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, id(node) in optional
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = (package or "").split(".")
                base = base[:len(base) - node.level + 1]
                module = ".".join([*base, node.module] if node.module else base)
            else:
                module = node.module
            yield module, id(node) in optional
            for alias in node.names:  # `from ncreel import resources`: a module too
                yield f"{module}.{alias.name}", id(node) in optional


def script_closure(script: Path) -> tuple[dict[str, bool], set[str]]:
    """Third-party top-level imports (name -> optional) and ncreel modules of a script."""
    third, seen, todo = {}, set(), [(script, None)]
    while todo:
        path, package = todo.pop()
        for module, optional in imports_of(path, package):
            top = module.split(".")[0]
            if top == "ncreel":
                file = module_file(module)
                if file is not None and module not in seen:
                    seen.add(module)
                    pkg = module if file.name == "__init__.py" else module.rpartition(".")[0]
                    todo.append((file, pkg))
            elif top not in sys.stdlib_module_names and top != "__future__":
                third[top] = third.get(top, True) and optional
    return third, seen


def rules():
    """(rule, env file, script file) of every rule with both conda: and script:."""
    out = []
    for smk in sorted((WORKFLOW / "rules").glob("*.smk")):
        blocks = re.split(r"^(?:rule|checkpoint) (\w+):\n", smk.read_text(), flags=re.M)
        for name, body in zip(blocks[1::2], blocks[2::2], strict=True):
            conda = re.search(r"^    conda:\n\s+\"([^\"]+)\"", body, re.M)
            script = re.search(r"^    script:\n\s+\"([^\"]+)\"", body, re.M)
            if script:
                assert conda, f"rule {name} has a script but no conda env"
                out.append((name, (smk.parent / conda.group(1)).resolve(),
                            (smk.parent / script.group(1)).resolve()))
    return out


def test_every_rule_env_lists_exactly_what_its_script_imports():
    found = rules()
    assert len(found) >= 10
    pyproject = {_name(d) for d in
                 tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]}
    needed: dict[Path, set[str]] = {}
    allowed: dict[Path, set[str]] = {}
    for name, env, script in found:
        assert env.parent == ROOT / "envs", f"rule {name}: env outside the top-level envs/"
        third, modules = script_closure(script)
        unknown = sorted(set(third) - set(PACKAGES))
        assert not unknown, f"rule {name} imports {unknown}: add them to PACKAGES here"
        for top, optional in third.items():
            conda_name, pypi_name = PACKAGES[top]
            assert pypi_name in pyproject, f"rule {name} imports {top}; pyproject.toml lacks it"
            allowed.setdefault(env, set()).add(conda_name)
            if not optional:
                needed.setdefault(env, set()).add(conda_name)
        for program, module in PROGRAMS.items():
            if module in modules:
                needed.setdefault(env, set()).add(program)
                allowed.setdefault(env, set()).add(program)
    for env in sorted(set(needed) | set(allowed)):
        deps = {_name(d) for d in yaml.safe_load(env.read_text())["dependencies"]} - {"python"}
        missing = needed.get(env, set()) - deps
        extra = deps - allowed.get(env, set())
        assert not missing, f"{env.name} lacks {sorted(missing)}, imported by its rules"
        assert not extra, f"{env.name} lists {sorted(extra)}, which none of its rules imports"
    assert {e.name for e in needed} == {p.name for p in (ROOT / "envs").glob("*.yaml")}


#: The top level the project was specified with (plus the project's own files).
TOP_LEVEL = {"Snakefile", "config", "envs", "profiles", "tests", "workflow", "README.md"}
PROJECT_FILES = {"Makefile", "pyproject.toml", "bench", "docs", ".ci"}


def test_top_level_layout_is_the_specified_one():
    tracked = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True,
                             check=True).stdout.split()
    top = {path.split("/")[0] for path in tracked}
    assert TOP_LEVEL <= top, f"missing at the top level: {sorted(TOP_LEVEL - top)}"
    assert not (WORKFLOW / "envs").exists(), "conda envs belong in the top-level envs/"


def test_snakemake_resolves_every_rule_env_to_the_top_level_envs(tmp_path, sample_nc):
    """Snakemake's own resolution of each rule's ``conda:`` file (what --sdm conda uses).

    A user's copy of the workflow files (as tests/workflow_run.py makes it) is parsed by
    Snakemake's API; conda itself is not needed to resolve and check the files.
    """
    work = make_workdir(tmp_path)
    (work / "resources").mkdir()
    (work / "resources" / sample_nc.name).symlink_to(sample_nc)
    code = (
        "from pathlib import Path\n"
        "from snakemake.api import SnakemakeApi\n"
        "from snakemake.settings.types import (DeploymentMethod, DeploymentSettings,\n"
        "    OutputSettings, ResourceSettings)\n"
        "with SnakemakeApi(OutputSettings()) as api:\n"
        "    wf = api.workflow(resource_settings=ResourceSettings(cores=1),\n"
        "        snakefile=Path('Snakefile'), workdir=Path.cwd(),\n"
        "        deployment_settings=DeploymentSettings(\n"
        "            deployment_method={DeploymentMethod.CONDA}))\n"
        "    for rule in wf._workflow.rules:\n"
        "        if rule.conda_env:\n"
        "            spec = rule.expand_conda_env({})\n"
        "            spec.check()\n"
        "            print(rule.name, Path(str(spec.file)).resolve())\n")
    out = subprocess.run([sys.executable, "-c", code], cwd=work, capture_output=True,
                         text=True, check=True).stdout
    found = dict(line.split(" ", 1) for line in out.splitlines() if line.strip())
    assert len(found) >= 10, out
    for rule, env in found.items():
        assert Path(env).parent == work / "envs", f"rule {rule}: {env}"
        assert Path(env).is_file(), f"rule {rule}: {env} does not exist"


def test_workflow_extra_installs_what_snakemake_report_needs():
    """``make demo`` installs the ``workflow`` extra only; ``make report`` runs in that venv.

    Snakemake keeps what ``--report`` imports (pygments) in its own ``reports`` extra: without
    it a fresh ``make demo`` venv stopped ``make report`` with "Python package pygments must
    be installed to create reports" (the test venv has pygments through pytest, so no other
    test saw it).
    """
    from importlib.metadata import requires

    from packaging.requirements import Requirement

    workflow = [Requirement(r) for r in tomllib.loads(
        (ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]["workflow"]]
    snakemake = next(r for r in workflow if r.name == "snakemake")
    report_deps = {Requirement(r).name for r in requires("snakemake")
                   if Requirement(r).marker and Requirement(r).marker.evaluate({"extra": "reports"})
                   and not Requirement(r).marker.evaluate({"extra": ""})}
    assert "pygments" in report_deps, f"snakemake's reports extra changed: {report_deps}"
    brought = {r.name for r in workflow} | {
        Requirement(r).name for r in requires("snakemake") if Requirement(r).marker
        and any(Requirement(r).marker.evaluate({"extra": e}) for e in snakemake.extras)}
    assert report_deps <= brought, (
        f"pyproject.toml's workflow extra lacks {sorted(report_deps - brought)} "
        "(snakemake --report needs them): use snakemake[reports]")
