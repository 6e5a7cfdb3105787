"""A rerun after an interrupted run redoes what the interruption left, quietly.

A run stopped (Ctrl-C, a killed controller) just as a shard job had written every output
leaves them marked incomplete by Snakemake, with no metadata. Snakemake checks the marks
only of the jobs it knows before reading the calibrate_render checkpoint, so it took the
shard as done: the rerun did not redo it and every later ``--report`` printed "Missing
metadata" for its outputs. The state is made here with Snakemake's own persistence code
(mark the shard's outputs incomplete, drop their metadata: what the interrupted run left,
as seen after a Ctrl-C at that moment), then the same command is run again.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from snakemake.persistence.file import FilePersistence
from test_slurm import workdir
from workflow_run import SMALL

pytestmark = [pytest.mark.integration]

SHARD = ["results/demo/cells/00000.copy", "results/demo/frames/00000",
         "results/demo/segments/00000.mp4"]


def run(work: Path, *args: str) -> str:
    proc = subprocess.run([sys.executable, "-m", "snakemake", "--cores", "2", *args,
                           "--config", *SMALL, "frames_per_shard=120"],
                          cwd=work, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return proc.stdout + proc.stderr


def test_outputs_an_interrupted_shard_left_are_redone_and_the_report_is_quiet(
        tmp_path_factory, sample_nc):
    work = workdir(tmp_path_factory, sample_nc, "interrupted")
    run(work)
    persistence = FilePersistence(nolock=True, path=work / ".snakemake")
    for path in SHARD:
        assert persistence._delete_record(path)  # the metadata the end would have written
        persistence._mark_incomplete(path, None)
        assert (work / path).exists()
    plan = run(work, "-n")
    assert ("ncreel: note: redoing the jobs of 3 output(s) an interrupted run left "
            f"({', '.join(sorted(SHARD))})") in plan
    assert re.search(r"rule process_shard:\n(    .*\n)*?    wildcards: shard=00000\n", plan)
    assert "Nothing to be done" not in plan and "missing provenance" not in plan
    log = run(work)
    assert "wildcards: shard=00000" in log and "wildcards: shard=00001" not in log
    assert not list((work / ".snakemake/incomplete").rglob("*"))
    assert "Nothing to be done" in run(work, "-n")  # and the note is not said again
    report = run(work, "--report", "report.html")
    assert "Missing metadata" not in report and "ncreel: note: redoing" not in report
