"""ruff on the Snakefile and workflow/rules/*.smk, through Snakemake's own parser.

ruff cannot read Snakemake's grammar (``rule x:``, ``input:``), so a ``.smk`` file handed
to it is a syntax error. Snakemake itself compiles every rule file to Python before it
runs it (:func:`snakemake.parser.parse`); this script does the same and checks that
Python with ruff's pyflakes (F) and bugbear (B) rules plus RUF100 (a ``noqa`` that
suppresses nothing). The Snakefile and its includes share one namespace at run time, so
they are checked as one module, in the order Snakemake runs them, with the names
Snakemake puts in that namespace (``workflow``, ``config``, ``rules``, ``directory``...)
as builtins. Style rules (E, W, I) are left out: the compiled code is re-spaced by
Snakemake's tokenizer (the files' format is snakefmt's job).

Usage: ``python tests/smk_lint.py [ROOT]``; prints ``file:line: CODE message`` for each
finding (lines of the ``.smk`` file) and exits 1 if there is any.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import types
from pathlib import Path

#: Rules that mean the same in compiled rule files as in Python modules.
SELECT = "F,B,RUF100"


class _Source:
    """The path object :func:`snakemake.parser.parse` expects."""

    def __init__(self, path: Path) -> None:
        self.path = str(path)

    def get_path_or_uri(self, secret_free: bool = True) -> str:
        return self.path


class _Cache:
    def open(self, source: _Source):
        return open(source.get_path_or_uri(), encoding="utf-8")


def snakemake_globals() -> list[str]:
    """Names a Snakefile sees without importing them (Snakemake's workflow namespace)."""
    import snakemake.api  # noqa: F401  (snakemake.workflow imports it first)
    import snakemake.ioflags
    import snakemake.ioutils
    import snakemake.workflow

    names = {n for n in vars(snakemake.workflow) if not n.startswith("_")}
    registered: dict = {}
    snakemake.ioutils.register_in_globals(registered)
    snakemake.ioflags.register_in_globals(registered)
    names |= set(registered)
    # Set by snakemake.workflow.Workflow on its namespace (not module attributes).
    names |= {"shell", "workflow", "checkpoints", "scatter", "gather", "github", "gitlab",
              "gitfile", "storage", "from_queue", "access", "config", "rules", "pep"}
    return sorted(names)


def compiled(root: Path) -> tuple[str, dict[int, tuple[str, int]]]:
    """The rule files compiled to Python as one module, and where each line came from."""
    import snakemake.api  # noqa: F401
    from snakemake.parser import parse

    snakefile = root / "Snakefile"
    includes = re.findall(r'^include:\s*"([^"]+)"', snakefile.read_text(), re.M)
    # Included files run where the Snakefile includes them, before its own rules: the
    # Snakefile's statements before its includes define nothing they use.
    files = [root / name for name in includes] + [snakefile]
    workflow = types.SimpleNamespace(sourcecache=_Cache())
    parts, origin, offset = [], {}, 0
    for path in files:
        linemap: dict[int, int] = {}
        code, _ = parse(_Source(path), workflow, linemap)
        code = code.expandtabs(4)
        if not code.endswith("\n"):
            code += "\n"
        n = code.count("\n")
        name = str(path.relative_to(root))
        for i in range(1, n + 1):
            origin[offset + i] = (name, linemap.get(i, i))
        parts.append(code)
        offset += n
    return "".join(parts), origin


def findings(root: Path) -> list[str]:
    """``file:line: CODE message`` for each ruff finding in the rule files."""
    code, origin = compiled(root)
    builtins = json.dumps(snakemake_globals())
    proc = subprocess.run(
        [str(Path(sys.executable).parent / "ruff"), "check", "--isolated", "--select", SELECT,
         "--config", f"builtins = {builtins}", "--output-format", "json",
         "--stdin-filename", "snakemake_rules.py", "-"],
        input=code, capture_output=True, text=True)
    if proc.returncode not in (0, 1):
        raise RuntimeError(f"ruff failed: {proc.stderr}")
    out = []
    for item in json.loads(proc.stdout or "[]"):
        name, line = origin.get(item["location"]["row"], ("?", item["location"]["row"]))
        out.append(f"{name}:{line}: {item['code']} {item['message']}")
    return out


if __name__ == "__main__":
    found = findings(Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).parents[1])
    print("\n".join(found))
    sys.exit(1 if found else 0)
