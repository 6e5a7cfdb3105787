"""`make lint` as part of the suite, so CI keeps the code and the rules clean."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from conftest import ROOT

BIN = Path(sys.executable).parent


def test_ruff_is_clean():
    subprocess.run([str(BIN / "ruff"), "check", "workflow", "tests", "bench"], cwd=ROOT,
                   check=True, capture_output=True, text=True)


def test_rules_are_snakefmt_formatted():
    subprocess.run([str(BIN / "snakefmt"), "--check", "Snakefile", "workflow/rules"],
                   cwd=ROOT, check=True, capture_output=True, text=True)
