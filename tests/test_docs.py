"""The documentation: README's size, the generated configuration pages, the strict site build."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import yaml
from ncreel import docgen
from ncreel.configcheck import load_schema

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
        "run `make docs` (python -m ncreel.docgen) and commit docs/configuration.md and "
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
    optional = {"install.md", "grids.md", "meshes.md", "reliability.md"}  # the hook adds them
    assert listed <= pages
    assert pages - listed <= optional


def test_site_builds_strictly(tmp_path):
    """mkdocs build --strict: a warning (a broken link or anchor, a page left out) fails."""
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path)],
        cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "WARNING" not in result.stderr
    assert (tmp_path / "clusters" / "derecho" / "index.html").is_file()
    assert (tmp_path / "configuration" / "index.html").is_file()


def test_optional_pages_join_the_site_once_they_exist(tmp_path):
    """docs/install.md (written elsewhere in the project) is linked from the quickstarts:
    absent, the links are plain text; present, it is in the navigation and linked."""
    shutil.copytree(ROOT / "docs", tmp_path / "docs")
    shutil.copy2(ROOT / "mkdocs.yml", tmp_path / "mkdocs.yml")
    (tmp_path / "docs" / "install.md").write_text("# Installation\n\nWithout root.\n")
    site = tmp_path / "site"
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
        cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    assert 'href="install/"' in (site / "index.html").read_text()  # in the navigation
    assert 'href="../../install/"' in (site / "clusters" / "derecho" / "index.html").read_text()


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
