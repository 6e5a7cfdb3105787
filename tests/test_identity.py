"""Input identity: what stats.json records and what every later job checks."""

from __future__ import annotations

import os

import netCDF4
import numpy as np
import pytest
from layouts import write_rectilinear
from ncreel.core.errors import NcreelError
from ncreel.input.identity import check_inputs, file_identity, input_identities, input_stamps


def _rewrite(path, **kw):
    """Write the file again (new inode, same name), as a re-download would."""
    tmp = path.with_suffix(".tmp.nc")
    write_rectilinear(tmp, **kw)
    os.replace(tmp, path)


def test_identity_is_stable_and_the_same_file_passes(tmp_path):
    path, _ = write_rectilinear(tmp_path / "a.nc")
    first = file_identity(path)
    assert file_identity(path) == first
    assert set(first) == {"path", "size", "mtime_ns", "digest"} and len(first["digest"]) == 64
    check_inputs([first])
    check_inputs([first], [str(path)])
    assert input_stamps([path]) == [[str(path), first["size"], first["mtime_ns"]]]


def test_changed_data_is_found_by_its_modification_time(tmp_path):
    path, _ = write_rectilinear(tmp_path / "a.nc")
    recorded = input_identities([path])
    with netCDF4.Dataset(path, "a") as nc:  # +100 K in place: same size, same header
        nc["tas"][:] = nc["tas"][:] + 100
    st = os.stat(path)
    os.utime(path, ns=(st.st_atime_ns, recorded[0]["mtime_ns"] + 1_000_000_000))
    with pytest.raises(NcreelError, match=r"input '.*a\.nc' changed after this run's statistics "
                                          r"were computed \(it was modified"):
        check_inputs(recorded)


def test_changed_grid_is_found_by_size(tmp_path):
    path, _ = write_rectilinear(tmp_path / "a.nc")
    recorded = input_identities([path])
    _rewrite(path, lat=np.arange(20.0), lon=np.arange(30.0))
    with pytest.raises(NcreelError, match="its size changed from"):
        check_inputs(recorded)


def test_changed_coordinates_found_even_with_the_old_size_and_time(tmp_path):
    path, _ = write_rectilinear(tmp_path / "a.nc")
    recorded = input_identities([path])
    _rewrite(path, start=10)  # the same grid, ten days later: same size
    assert os.stat(path).st_size == recorded[0]["size"]
    os.utime(path, ns=(recorded[0]["mtime_ns"], recorded[0]["mtime_ns"]))
    with pytest.raises(NcreelError, match="its header or coordinates changed"):
        check_inputs(recorded)


def test_removed_and_unknown_files(tmp_path):
    a, _ = write_rectilinear(tmp_path / "a.nc")
    b, _ = write_rectilinear(tmp_path / "b.nc", start=3)
    recorded = input_identities([a])
    with pytest.raises(NcreelError, match="it was not among the run's inputs"):
        check_inputs(recorded, [str(a), str(b)])
    a.unlink()
    with pytest.raises(NcreelError, match="it no longer exists"):
        check_inputs(recorded)


def test_string_times_in_a_group_digest_the_same_and_open_files_survive(tmp_path):
    """Text coordinates hash by their strings; a digest taken while xarray has the file
    open leaves xarray's handle usable (HDF5 shares one file between two handles)."""
    import xarray as xr
    from layouts import write_group, write_string_times
    from ncreel.input.identity import header_digest

    p = write_string_times(tmp_path / "s.nc", ["2007-10-01T00:00:00Z", "2007-10-01T06:00:00Z"])
    g = write_group(tmp_path / "g.nc", p)
    first = header_digest(g)
    with xr.open_dataset(g, group="forecast", decode_times=False) as ds:
        assert header_digest(g) == first
        assert ds["v"].values.shape == (2, 2, 3)
        assert header_digest(g) == first


def test_the_check_child_fits_in_what_shard_jobs_declare_for_it(sample_nc):
    """The input check's child process (``python -m ncreel.input.identity``) stays within
    :data:`ncreel.run.resources.IDENTITY_CHECK_MB`, which a shard job's ``mem_mb`` adds for it
    (PBS counts that child against the job's memory)."""
    import subprocess
    import sys

    from ncreel.run.resources import IDENTITY_CHECK_MB

    code = ("import resource, sys\n"
            "from ncreel.input.identity import check_inputs, input_identities\n"
            "paths = [sys.argv[1]]\n"
            "check_inputs(input_identities(paths), paths)\n"
            "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    out = subprocess.run([sys.executable, "-c", code, str(sample_nc)], capture_output=True,
                         text=True, check=True, env=env)
    child_kb = int(out.stdout.split()[-1])
    assert 10_000 < child_kb <= IDENTITY_CHECK_MB * 1024, child_kb
