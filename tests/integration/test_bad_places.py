"""Bad places for a run's outputs and logs stop the workflow with one line before any job."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from workflow_run import make_workdir

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("place, said", [
    ("results/demo", "output directory 'results/demo' is a file, not a directory: move it "
     "away (ncreel writes there), or choose another run name (run=NAME)"),
    ("logs/demo", "log directory 'logs/demo' is a file, not a directory: move it away "
     "(ncreel writes there), or choose another run name (run=NAME)"),
])
def test_run_or_log_directory_that_is_a_file_is_one_line_before_any_job(tmp_path, sample_nc,
                                                                        place, said):
    """`results/<run>` or `logs/<run>` a file: exactly one ``ncreel: error:`` line naming it
    and what to do, no traceback (was FileExistsError at common.smk), no job started."""
    (tmp_path / "work").mkdir()
    work = make_workdir(tmp_path / "work")
    (work / place).parent.mkdir(parents=True)
    (work / place).write_text("not a directory\n")
    proc = subprocess.run([sys.executable, "-m", "snakemake", "--cores", "1", "--config",
                           f"input={sample_nc}"], cwd=work,
                          capture_output=True, text=True)
    errors = [ln for ln in proc.stderr.splitlines() if ln.startswith("ncreel: error:")]
    assert proc.returncode != 0 and errors == [f"ncreel: error: {said}"], proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr
    assert not Path(work / ".snakemake" / "scripts").exists()  # no job ran
