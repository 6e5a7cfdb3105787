"""The documentation: README's size, the generated configuration pages, the strict site build."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import yaml
from ncreel.config import docgen
from ncreel.config.configcheck import load_schema

ROOT = Path(__file__).resolve().parents[1]
USER_DOCS = [ROOT / "README.md", ROOT / "CHANGELOG.md", ROOT / "config" / "README.md",
             *sorted((ROOT / "docs").rglob("*.md"))]


def test_readme_is_a_guide_of_at_most_200_lines():
    assert len((ROOT / "README.md").read_text().splitlines()) <= 200


def test_readme_keeps_the_test_command_ci_and_users_run():
    text = (ROOT / "README.md").read_text()
    assert "make demo" in text
    assert "make test PYTEST_ARGS=\"-m 'not slurm and not pbs'\"" in text


def test_user_documents_hold_no_commit_hashes_or_issue_numbers():
    found = []
    for path in USER_DOCS:
        for n, line in enumerate(path.read_text().splitlines(), 1):
            if re.search(r"\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*[0-9])[0-9a-f]{7,40}\b", line) \
                    or re.search(r"\b(issue|PR|pull request) ?#?\d+|#\d{2,}\b", line, re.I):
                found.append(f"{path.relative_to(ROOT)}:{n}: {line.strip()}")
    assert not found, "\n".join(found)


def test_committed_configuration_pages_are_what_the_schema_gives():
    assert docgen.main(["--check", "--root", str(ROOT)]) == 0, (
        "run `make docs` (python -m ncreel.config.docgen) and commit docs/configuration.md and "
        "config/README.md")


def test_check_fails_when_a_page_drifts(tmp_path):
    for path, text in docgen.pages(tmp_path).items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    assert docgen.main(["--check", "--root", str(tmp_path)]) == 0
    page = tmp_path / "docs" / "configuration.md"
    page.write_text(page.read_text().replace("`960`", "`961`"))
    assert docgen.main(["--check", "--root", str(tmp_path)]) == 1
    assert docgen.main(["--root", str(tmp_path)]) == 0  # rewrites it
    assert docgen.main(["--check", "--root", str(tmp_path)]) == 0


def test_every_setting_and_its_default_is_on_the_page():
    page = docgen.reference()
    schema = load_schema()

    def walk(node, prefix):
        for name, prop in node.get("properties", {}).items():
            yield f"{prefix}{name}", prop
            yield from walk(prop, f"{prefix}{name}.")

    entries = [*walk(schema, ""), *walk(schema["$defs"]["etr_params"], "cells.params.")]
    assert len(entries) > 50
    for key, prop in entries:
        section = page.split(f"### `{key}`\n", 1)
        assert len(section) == 2, f"no section for {key}"
        head = section[1].split("\n### ", 1)[0]
        if "default" in prop and key not in schema["required"]:
            value = prop["default"]
            shown = ("null" if value is None else str(value).lower() if isinstance(value, bool)
                     else ".inf" if value == float("inf") else str(value))
            assert shown.replace("'", '"') in head.replace("'", '"'), (key, shown, head)


def test_mkdocs_nav_lists_every_page_and_only_existing_ones():
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text())

    def files(nav):
        for entry in nav:
            value = next(iter(entry.values())) if isinstance(entry, dict) else entry
            yield from files(value) if isinstance(value, list) else [value]

    listed = set(files(config["nav"]))
    pages = {str(p.relative_to(ROOT / "docs")) for p in (ROOT / "docs").rglob("*.md")}
    assert listed == pages


def test_site_builds_strictly(tmp_path):
    """mkdocs build --strict: a warning (a broken link or anchor, a page left out) fails."""
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path)],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert result.returncode == 0, result.stdout + result.stderr
    assert "WARNING" not in result.stderr.upper()
    assert (tmp_path / "clusters" / "derecho" / "index.html").is_file()
    assert (tmp_path / "configuration" / "index.html").is_file()


def test_site_has_sections_search_and_copyable_code(tmp_path):
    """Five sections in the top bar (not 20 pages), the search index, copy buttons."""
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text())
    assert [next(iter(e)) for e in config["nav"]] == [
        "Getting started", "User guide", "Clusters", "Reference", "Development"]
    assert "content.code.copy" in config["theme"]["features"]
    site = tmp_path / "site"
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert result.returncode == 0, result.stdout + result.stderr
    index = json.loads((site / "search" / "search_index.json").read_text())
    assert any("qsub" in doc["text"] for doc in index["docs"])
    page = (site / "clusters" / "derecho" / "index.html").read_text()
    assert page.count('class="md-tabs__item') == 5


def _snakemake_commands(text: str) -> list[str]:
    """`snakemake ...` command lines in a page: in code blocks (joined over trailing
    backslashes) and in inline code that names a run file (an option alone, such as
    `snakemake --directory`, is not a command)."""
    found, block = [], False
    lines = iter(text.splitlines())
    for line in lines:
        if line.lstrip().startswith("```"):
            block = not block
            continue
        if block:
            cmd = line.strip().removeprefix("$ ")
            while cmd.endswith("\\"):
                cmd = cmd[:-1] + next(lines, "").strip()
            if cmd.startswith("snakemake "):
                found.append(cmd)
        else:
            found += [c for c in re.findall(r"`([^`]+)`", line)
                      if c.startswith("snakemake ") and "--configfile" in c]
    return found


def test_every_documented_local_snakemake_run_gives_cores():
    """Snakemake stops a local run without --cores ("cores have to be specified"): a
    command in the documents that runs jobs here names them, or is a dry run, a report or
    picture, or runs under a profile or executor."""
    no_cores_needed = ("-n", "--cores", "--profile", "--executor", "--report", "--rulegraph",
                       "--dag", "--lint", "--unlock", "--help", "--version")
    missing = [f"{page.relative_to(ROOT)}: {cmd}" for page in USER_DOCS
               for cmd in _snakemake_commands(page.read_text(encoding="utf-8"))
               if not any(opt in cmd.split() for opt in no_cores_needed)]
    assert not missing, "\n".join(missing)


def test_architecture_page_names_every_folder_and_module():
    """The package tree on docs/architecture.md follows the code (folders, then modules)."""
    text = (ROOT / "docs" / "architecture.md").read_text()
    tree = text[text.index("workflow/ncreel/ "):text.index("workflow/executor-plugin-pbs-pro/")]
    package = ROOT / "workflow" / "ncreel"
    for folder in sorted(p for p in package.iterdir() if (p / "__init__.py").is_file()):
        block = re.search(rf"^  {folder.name}/ +(.*?)(?=^  \S|\Z)", tree, re.M | re.S)
        assert block, f"{folder.name}/ is not on the architecture page"
        for module in sorted(folder.glob("*.py")):
            if module.stem != "__init__":
                assert f"{module.name}" in block.group(1), f"{folder.name}/{module.name}"
        assert f"| `{folder.name}/` |" in text, f"{folder.name}/ is not in the layers table"


def test_the_three_common_runs_are_their_run_files_and_each_loads(sample_nc, tmp_path,
                                                                  monkeypatch):
    """docs/common-runs.md shows config/decade_movie.yaml, field_table.yaml and
    era5_movie.yaml as they are, and each passes every parse-time check (the ERA5 one on an
    ERA5-like file of the same layout: 0.25 degree, hourly, VAR_2T)."""
    import numpy as np
    import xarray as xr
    from ncreel.jobs.runconfig import load_config
    from snakemake.utils import validate

    page = (ROOT / "docs" / "common-runs.md").read_text()
    blocks = re.findall(r"```yaml\n# (config/[\w.]+)\n(.*?)```", page, re.S)
    assert [name for name, _ in blocks] == ["config/decade_movie.yaml",
                                            "config/field_table.yaml",
                                            "config/era5_movie.yaml"]
    era5 = tmp_path / "e5.oper.an.sfc.128_167_2t.ll025sc.1990010100_1990010101.nc"
    xr.Dataset({"VAR_2T": (("time", "latitude", "longitude"),
                           np.full((2, 721, 1440), 280.0, "f4"), {"units": "K"})},
               coords={"time": ("time", [0.0, 1.0], {"units": "hours since 1990-01-01"}),
                       "latitude": ("latitude", np.linspace(90, -90, 721),
                                    {"units": "degrees_north"}),
                       "longitude": ("longitude", np.arange(1440) * 0.25,
                                     {"units": "degrees_east"})}).to_netcdf(era5)
    monkeypatch.chdir(ROOT)  # the run files' relative paths (the field's polygon)
    inputs = {"config/decade_movie.yaml": str(sample_nc),
              "config/field_table.yaml": str(sample_nc), "config/era5_movie.yaml": str(era5)}
    base = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    for name, shown in blocks:
        config = yaml.safe_load((ROOT / name).read_text())
        assert yaml.safe_load(shown) == config, name
        run = load_config({**base, **config, "input": inputs[name]}, validate=validate)
        assert run.run == config["run"]
        if "outputs" in config:
            assert run.outputs == tuple(config["outputs"])
    assert run.grid == {"n_time": 2, "ny": 721, "nx": 1440}


def test_the_cells_page_names_partitions_as_the_loader_does():
    """docs/cells.md said a run's partition is `cells_demo`; the loader names it
    `<table>$<run>` (ncreel.pg.sql.partition_name), and the normalised layout's tables'
    partitions likewise."""
    from ncreel.pg.layout import layout_tables
    from ncreel.pg.sql import partition_name

    page = (ROOT / "docs" / "cells.md").read_text()
    assert "cells_demo" not in page
    assert f"`{partition_name('cells', 'demo')}`" in page
    assert f'DROP TABLE "{partition_name("cells", "demo")}";' in page
    for kind, name in layout_tables("t").items():
        assert f"`<table>_{kind}$<run>`" in page and partition_name(name, "r") == f"t_{kind}$r"
