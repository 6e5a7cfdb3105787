"""`make lint` as part of the suite: ruff on the Python and (compiled by Snakemake) on the
rule files, snakefmt, `snakemake --lint`; CI keeps the code and the rules clean."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from conftest import ROOT

BIN = Path(sys.executable).parent


def test_ruff_is_clean():
    subprocess.run([str(BIN / "ruff"), "check", "workflow", "tests", "bench", ".ci"], cwd=ROOT,
                   check=True, capture_output=True, text=True)


def test_rules_are_snakefmt_formatted():
    subprocess.run([str(BIN / "snakefmt"), "--check", "Snakefile", "workflow/Snakefile",
                    "workflow/rules"], cwd=ROOT, check=True, capture_output=True, text=True)


def test_ruff_checks_the_rule_files():
    """The Snakefile and rule files, compiled by Snakemake, pass ruff (tests/smk_lint.py)."""
    from smk_lint import findings

    assert findings(ROOT) == []


def test_rule_file_check_finds_unused_imports_undefined_names_and_dead_noqa(tmp_path):
    from smk_lint import findings

    (tmp_path / "rules").mkdir()
    (tmp_path / "Snakefile").write_text(
        'include: "rules/a.smk"\n\n\nrule all:\n    input:\n        OUT,\n')
    (tmp_path / "rules" / "a.smk").write_text(
        "import json\nimport os  # noqa: E402\n\nOUT = os.getcwd()\n\n\n"
        "rule a:\n    output:\n        directory(OUT),\n    run:\n        print(MISSING)\n")
    found = findings(tmp_path)
    assert "rules/a.smk:1: F401 `json` imported but unused" in found
    assert any(f.startswith("rules/a.smk:2: RUF100") for f in found)
    assert any(f.startswith("rules/a.smk:11: F821 Undefined name `MISSING`") for f in found)
    assert len(found) == 3, found  # OUT (across files) and directory (Snakemake's) are known


def test_every_noqa_is_in_a_file_ruff_checks():
    """A `# noqa` in a file no ruff run reads suppresses nothing and says something false."""
    import tomllib

    ruff = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["ruff"]
    assert not set(ruff.get("extend-include", [])) & set(ruff.get("extend-exclude", []))
    shown = subprocess.run([str(BIN / "ruff"), "check", "--show-files", "workflow", "tests",
                            "bench", ".ci"], cwd=ROOT, check=True, capture_output=True, text=True)
    checked = {Path(line.strip()).resolve() for line in shown.stdout.splitlines()
               if line.strip().startswith("/")}
    checked |= {ROOT / "Snakefile", *(ROOT / "workflow" / "rules").glob("*.smk")}
    tracked = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, check=True,
                             capture_output=True).stdout.decode().split("\0")
    with_noqa = [ROOT / f for f in tracked if f and (ROOT / f).is_file()
                 and (ROOT / f).suffix in (".py", ".smk", "") and
                 "# noqa" in (ROOT / f).read_text(errors="replace")]
    assert with_noqa and not [str(p) for p in with_noqa if p.resolve() not in checked]


def test_snakemake_lint_is_clean(tmp_path, sample_nc):
    from workflow_run import make_workdir

    work = make_workdir(tmp_path)
    proc = subprocess.run([str(BIN / "python"), "-m", "snakemake", "--lint", "--config",
                           f"input={sample_nc}"], cwd=work, capture_output=True, text=True)
    assert proc.returncode == 0 and "Congratulations" in proc.stdout + proc.stderr, \
        proc.stdout[-3000:] + proc.stderr[-3000:]
