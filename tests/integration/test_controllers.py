"""The controller batch scripts (profiles/*/controller.*) pass targets as targets.

Each script runs ``snakemake --profile P --configfile=RUN_CONFIG $RUN_ARGS``. Snakemake's
``--configfile`` takes every word after it up to the next option, so with ``--configfile
FILE`` a target in ``RUN_ARGS`` (``all``, ``results/<run>/movie.mp4``) was read as a second
config file: a ``FileNotFoundError`` traceback, or a file's content taken for settings. The
scripts are run here as the batch system would run them (``bash SCRIPT`` with the
variables ``qsub -v``/``sbatch`` set), in dry-run, with the real Snakemake and profile,
the target first in ``RUN_ARGS`` (``-n`` first would end the file list by chance).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from test_pbs import pbs as pbs_server  # noqa: F401  (its `pbs` fixture)
from test_pbs import pbs_env
from test_slurm import SLURM_ENV, workdir

pytestmark = [pytest.mark.integration]


@pytest.mark.parametrize("script, needs", [
    pytest.param("profiles/casper/controller.pbs", "pbs", marks=pytest.mark.pbs),
    pytest.param("profiles/derecho/controller.pbs", "pbs", marks=pytest.mark.pbs),
    pytest.param("profiles/slurm/controller.sbatch", "slurm", marks=pytest.mark.slurm),
])
def test_a_target_in_run_args_is_a_target_not_a_config_file(
        script, needs, request, tmp_path_factory, sample_nc):
    if needs == "pbs":
        request.getfixturevalue("pbs_server")
    work = workdir(tmp_path_factory, sample_nc, "controller")
    (work / "run.yaml").write_text("run: ctl\n")
    venv = work / "venv"  # the script sources $VENV/bin/activate
    (venv / "bin").mkdir(parents=True)
    (venv / "bin/activate").write_text(f"PATH={Path(sys.executable).parent}:$PATH\n")
    env = pbs_env(PBS_ACCOUNT="ncreel") if needs == "pbs" else {**os.environ, **SLURM_ENV}
    env.pop("SNAKEMAKE_PROFILE", None)
    env.update(PBS_O_WORKDIR=str(work), SLURM_SUBMIT_DIR=str(work), VENV=str(venv),
               RUN_CONFIG=str(work / "run.yaml"), RUN_ARGS="results/ctl/movie.mp4 -n")
    proc = subprocess.run(["bash", str(work / script)], cwd=work, env=env,
                          capture_output=True, text=True, timeout=600)
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0, log[-3000:]
    assert "Traceback" not in log and "This was a dry-run" in log
    # Only what the movie needs: the table's jobs are not part of that target.
    assert "output: results/ctl/movie.mp4" in log
    assert "rule reduce_cells" not in log and "rule preview" not in log, log[-3000:]
