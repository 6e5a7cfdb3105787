"""``python -m ncreel.sample``: the command the README and quickstarts give for sample input."""

from __future__ import annotations

import subprocess
import sys

from ncreel.sample import sample_path


def _sample(*args, cwd):
    return subprocess.run([sys.executable, "-m", "ncreel.sample", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=60)


def test_copies_the_sample_named_by_the_destination(tmp_path):
    out = _sample("data/ostia_monthly.nc", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    copied = tmp_path / "data" / "ostia_monthly.nc"
    assert copied.read_bytes() == sample_path("ostia_monthly.nc").read_bytes()
    out = _sample("first.nc", "E1_north_america.nc", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert (tmp_path / "first.nc").read_bytes() == sample_path("E1_north_america.nc").read_bytes()


def test_help_and_an_unknown_name_are_one_answer_not_a_traceback(tmp_path):
    out = _sample("--help", cwd=tmp_path)
    assert out.returncode == 0 and "usage: python -m ncreel.sample" in out.stdout
    assert not list(tmp_path.iterdir())
    out = _sample("resources/tas.nc", cwd=tmp_path)
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert out.stderr.count("\n") == 1 and out.stderr.startswith(
        "ncreel: error: tas.nc is not in this iris-sample-data release")
    assert "A1B_north_america.nc" in out.stderr and "ostia_monthly.nc" in out.stderr
    assert not (tmp_path / "resources").exists()


def test_a_sample_already_there_is_left_as_it_is(tmp_path):
    """A second copy would give the file a new time stamp, and Snakemake would redo every
    run that reads it; a different file of that name is never overwritten."""
    import os

    assert _sample("resources/A1B_north_america.nc", cwd=tmp_path).returncode == 0
    copied = tmp_path / "resources" / "A1B_north_america.nc"
    os.utime(copied, (1_000_000_000, 1_000_000_000))
    again = _sample("resources/A1B_north_america.nc", cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    assert copied.stat().st_mtime == 1_000_000_000
    mine = tmp_path / "ostia_monthly.nc"
    mine.write_bytes(b"my own file")
    out = _sample(str(mine), cwd=tmp_path)
    assert out.returncode == 2 and out.stderr == (
        f"ncreel: error: {mine} exists and is not ostia_monthly.nc of iris-sample-data: "
        "move it away, or give another destination\n")
    assert mine.read_bytes() == b"my own file"
