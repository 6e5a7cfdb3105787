"""Shared fixtures: the package on sys.path, the real sample file, a real PostgreSQL server."""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "workflow"))
# Snakemake started by tests finds ncreel's executor plugin (workflow/
# snakemake_executor_plugin_pbs_pro) here, as `pip install -e .` makes it findable.
os.environ["PYTHONPATH"] = os.pathsep.join(
    [str(ROOT / "workflow"), *filter(None, [os.environ.get("PYTHONPATH")])])


@pytest.fixture(scope="session")
def sample_nc() -> Path:
    """The real HadCM3 sample (A1B_north_america.nc) from iris-sample-data."""
    from ncreel.sample import sample_path

    return sample_path("A1B_north_america.nc")


def _pg_bin(name: str) -> str:
    found = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))
    if found:
        return found[-1]
    exe = shutil.which(name)
    if exe is None:
        raise RuntimeError(f"PostgreSQL server program '{name}' not found: run `make sysdeps`")
    return exe


@pytest.fixture(scope="session")
def pg_server():
    """A throw-away PostgreSQL server on a unix socket in a temp dir; yields its conninfo.

    initdb refuses to run as root, so as root the cluster is owned by the ``postgres``
    user (created by the Debian package) and commands run through ``runuser``.
    ``listen_addresses=''`` means no TCP port, so parallel runs never clash.
    """
    as_root = os.geteuid() == 0
    base = Path(tempfile.mkdtemp(prefix="ncreel-pg-"))
    data, sock = base / "data", base / "sock"
    sock.mkdir()
    prefix = ["runuser", "-u", "postgres", "--"] if as_root else []
    if as_root:
        shutil.chown(base, "postgres")
        shutil.chown(sock, "postgres")
    subprocess.run([*prefix, _pg_bin("initdb"), "-D", str(data), "-A", "trust", "-U", "postgres",
                    "-E", "UTF8", "--locale=C.UTF-8"], check=True, capture_output=True)
    subprocess.run([*prefix, _pg_bin("pg_ctl"), "-D", str(data), "-w", "-l", str(base / "log"),
                    "-o", f"-c listen_addresses='' -c unix_socket_directories='{sock}' "
                          "-c fsync=off -c full_page_writes=off",
                    "start"], check=True, capture_output=True)
    info = {"host": str(sock), "user": "postgres", "dbname": "postgres"}
    info["conninfo"] = f"host={sock} user=postgres dbname=postgres"
    try:
        yield info
    finally:
        subprocess.run([*prefix, _pg_bin("pg_ctl"), "-D", str(data), "-m", "immediate", "stop"],
                       capture_output=True)
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture
def pg_conn(pg_server):
    """A psycopg 3 connection to :func:`pg_server` (autocommit)."""
    import psycopg

    with psycopg.connect(pg_server["conninfo"], autocommit=True) as conn:
        yield conn


@pytest.fixture(scope="session")
def eofs_data() -> Path:
    """Directory of the real NetCDF examples shipped by the PyPI package eofs."""
    import eofs

    return Path(eofs.__file__).parent / "examples" / "example_data"


def derive_nc(src: Path, dest: Path, *, variable: str, rename: dict | None = None,
              time_attrs: dict | None = None, drop_attrs: bool = False) -> Path:
    """Write a copy of a real file with its time axis renamed/re-encoded (messy-input tests)."""
    import xarray as xr

    with xr.open_dataset(src, decode_times=False) as ds:
        ds = ds[[variable]].load()
    time = [d for d in ds[variable].dims if d in ds.coords and "since" in
            str(ds[d].attrs.get("units", ""))][0]
    if time_attrs is not None:
        ds[time].attrs = dict(time_attrs)
    if drop_attrs:
        ds[time].attrs = {}
    if rename:
        ds = ds.rename(rename)
        ds.encoding.pop("unlimited_dims", None)
    ds.to_netcdf(dest)
    return dest
