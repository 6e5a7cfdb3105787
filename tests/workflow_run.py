"""Run the workflow in a fresh copy of the repository: shared by the whole-workflow tests."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

from conftest import ROOT

SMALL = ["width=160", "height=96", "dpi=40", "preset=ultrafast"]


def make_workdir(path: Path) -> Path:
    """A copy of the repository's workflow files, as a user's clone would have them."""
    for name in ("Snakefile", "config", "envs", "workflow", "profiles"):
        src = ROOT / name
        if src.is_dir():
            shutil.copytree(src, path / name,
                            ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            shutil.copy2(src, path / name)
    return path


def snakemake(workdir: Path, *args: str, check: bool = True, **kw):
    cmd = [sys.executable, "-m", "snakemake", "--cores", "2", *args]
    proc = subprocess.run(cmd, cwd=workdir, capture_output=True, text=True, **kw)
    if check and proc.returncode != 0:
        raise AssertionError(f"{' '.join(cmd)} failed:\n{proc.stderr[-5000:]}")
    return proc


def probe(path: Path) -> dict:
    out = subprocess.run(["ffprobe", "-v", "error", "-count_frames", "-select_streams", "v:0",
                          "-show_entries", "stream=codec_name,pix_fmt,width,height,"
                          "nb_read_frames", "-of", "json", str(path)],
                         check=True, capture_output=True, text=True).stdout
    return json.loads(out)["streams"][0]


def psql_load(pg_server, results: Path) -> None:
    subprocess.run(["psql", "-X", "-q", "-h", pg_server["host"], "-U", "postgres", "-d",
                    "postgres", "-f", "cells.sql"], cwd=results, check=True,
                   capture_output=True, text=True)
