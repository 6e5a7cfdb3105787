"""ncreel as a wheel: its data files are package data, and the cell-model API works
outside the repository tree (a user's own model, run through ncreel.cells)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import textwrap

import pytest
from conftest import ROOT

USER_MODEL = """
import numpy as np
from ncreel.cells import cell_model

def columns(ctx, scale=1.0):
    return [("time_index", "integer"), ("cell_id", "bigint"), ("scaled", "double precision")]

@cell_model(columns=columns)
def scaled(block, t0, ctx, scale=1.0):
    flat = block.reshape(block.shape[0], -1)
    t, cell = np.nonzero(np.isfinite(flat))
    return {"time_index": t + t0, "cell_id": cell, "scaled": flat[t, cell] * scale}
"""

RUN = """
import io, sys
import numpy as np
import xarray as xr
import ncreel, ncreel.cells
from ncreel.cells import ETR_DEFAULTS, ShardRows, cells_settings
from ncreel.config.configcheck import schema_path
from ncreel.config.settings import CellsSettings
from ncreel.input.source import open_series

assert ncreel.__file__.startswith(sys.argv[1]), ncreel.__file__
print("schema", schema_path())
print("etr", sorted(ETR_DEFAULTS)[:2])
t = np.arange(2.0)
ds = xr.Dataset({"tas": (("time", "lat", "lon"), np.arange(12.0).reshape(2, 2, 3))},
                coords={"time": ("time", t, {"units": "days since 2000-01-01"}),
                        "lat": ("lat", [10.0, 20.0], {"units": "degrees_north"}),
                        "lon": ("lon", [0.0, 1.0, 2.0], {"units": "degrees_east"})})
ds.to_netcdf("tas.nc")
cells = CellsSettings.from_params(cells_settings({"model": "usermodel:scaled",
                                                  "params": {"scale": 10.0}}))
with open_series("tas.nc", "tas") as series:
    rows = ShardRows.for_series(series, cell_mean=np.zeros((2, 3)), cells=cells)
    fh = io.BytesIO()
    n = rows.write(fh, 0, series.read(0, 2))
print("rows", n)
sys.stdout.write(fh.getvalue().decode())
"""


def test_wheel_installs_outside_the_tree_and_runs_a_user_cell_model(tmp_path):
    # Built from a copy of what the wheel is made of: building in the clone would leave
    # build/ and *.egg-info there.
    src = tmp_path / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, src / name)
    shutil.copytree(ROOT / "workflow", src / "workflow",
                    ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    dist = tmp_path / "dist"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(dist),
                    str(src)], check=True, capture_output=True, timeout=600)
    [wheel] = dist.glob("ncreel-*.whl")
    site = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target",
                    str(site), str(wheel)], check=True, capture_output=True, timeout=300)
    work = tmp_path / "work"
    work.mkdir()
    (work / "usermodel.py").write_text(textwrap.dedent(USER_MODEL))
    (work / "run.py").write_text(textwrap.dedent(RUN))
    # Only the installed package and the environment's libraries: no repository on the
    # path (-I ignores PYTHONPATH), the user's module from the working directory.
    path = os.pathsep.join([str(site), str(work), sysconfig.get_paths()["purelib"],
                            sysconfig.get_paths()["platlib"]])
    proc = subprocess.run([sys.executable, "-I", "-c",
                           f"import sys; sys.path[:0] = {path.split(os.pathsep)!r}; "
                           "exec(open('run.py').read())", str(site)],
                          cwd=work, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = proc.stdout.splitlines()
    assert lines[0] == f"schema {site / 'ncreel' / '_schemas' / 'config.schema.yaml'}"
    assert lines[1].startswith("etr [")
    assert lines[2] == "rows 12"
    assert lines[3:6] == ["0\t0\t0.0", "0\t1\t10.0", "0\t2\t20.0"]
    assert lines[-1] == "1\t5\t110.0"
    assert str(ROOT) not in proc.stdout


@pytest.mark.parametrize("name", ["land-110m.json", "countries-50m.json"])
def test_natural_earth_and_schema_are_package_data(name):
    import tomllib

    cfg = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert "ncreel._schemas" in cfg["packages"]
    assert cfg["package-dir"]["ncreel._schemas"] == "workflow/schemas"
    assert (ROOT / "workflow/ncreel/data/natural_earth" / name).is_file()
