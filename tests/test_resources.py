"""Declared resources: a mem_mb above the cap that will run the job is said, not hidden."""

from __future__ import annotations

import inspect
import shutil

import pytest
from ncreel.resources import said_over_cap
from workflow_run import make_workdir, snakemake


def test_said_over_cap_keeps_value_and_signature(capsys):
    def mem(wildcards, input, threads, attempt):
        return 1000 * attempt

    wrapped = said_over_cap("rule_x", mem, lambda: 1500)
    # Snakemake passes only the arguments a resource function names.
    assert list(inspect.signature(wrapped).parameters) == ["wildcards", "input", "threads",
                                                           "attempt"]
    assert wrapped(None, None, 1, 1) == 1000 and capsys.readouterr().err == ""
    assert wrapped(None, None, 1, 2) == 2000
    err = capsys.readouterr().err.splitlines()
    assert err == [ln for ln in err if ln.startswith("ncreel: warning: rule_x declares "
                                                     "mem_mb=2000, above the mem_mb limit 1500")]
    assert len(err) == 1
    assert wrapped(None, None, 1, 3) == 3000 and capsys.readouterr().err == ""  # once a rule
    assert said_over_cap("rule_y", mem, lambda: None)(None, None, 1, 9) == 9000


@pytest.mark.integration
def test_rule_asking_above_the_cap_is_said_before_it_runs(tmp_path, sample_nc):
    work = make_workdir(tmp_path)
    (work / "resources").mkdir()
    shutil.copy(sample_nc, work / "resources" / "A1B_north_america.nc")
    # calibrate_render declares 2000 MB; a 1000 MB cap lowers it without a word from Snakemake.
    proc = snakemake(work, "-n", "--resources", "mem_mb=1000")
    said = [ln for ln in proc.stderr.splitlines() if ln.startswith("ncreel: warning:")]
    assert any("calibrate_render declares mem_mb=2000, above the mem_mb limit 1000" in ln
               for ln in said), proc.stderr[-3000:]
