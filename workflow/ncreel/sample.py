"""Bundled real sample input: HadCM3 air_temperature from the PyPI package iris-sample-data.

``python -m ncreel.sample DEST`` copies ``A1B_north_america.nc`` (240 annual means
1860-2099, 360-day calendar, 37 x 49 grid; UK Open Government Licence) to DEST; a DEST
named like another file of the package (``E1_north_america.nc``, ``ostia_monthly.nc``)
copies that one. A DEST that already holds the sample is left as it is (a new copy's
time stamp would make Snakemake redo the runs that read it).
"""

from __future__ import annotations

import argparse
import filecmp
import shutil
import sys
from pathlib import Path

from ncreel.core.io import atomic_path


def sample_path(name: str = "A1B_north_america.nc") -> Path:
    """Path of a file shipped in the ``iris_sample_data`` package.

    Raises
    ------
    FileNotFoundError
        If the package or the file is not installed (the message lists the package's
        NetCDF files).
    """
    try:
        import iris_sample_data
    except ImportError as err:
        raise FileNotFoundError("pip install iris-sample-data to get the sample input") from err
    folder = Path(iris_sample_data.__file__).parent / "sample_data"
    path = folder / name
    if not path.is_file():
        have = ", ".join(sorted(p.name for p in folder.glob("*.nc")))
        raise FileNotFoundError(f"{name} is not in this iris-sample-data release ({folder}); "
                                f"its NetCDF files: {have}")
    return path


def main(argv: list[str] | None = None) -> int:
    """Copy a sample file to DEST; return the exit status (2: no such sample file)."""
    parser = argparse.ArgumentParser(
        prog="python -m ncreel.sample",
        description="Copy a real NetCDF sample of the PyPI package iris-sample-data.")
    parser.add_argument("dest", nargs="?", default="resources/A1B_north_america.nc",
                        help="where to write it (default: %(default)s)")
    parser.add_argument("name", nargs="?",
                        help="the sample's file name (default: DEST's file name, e.g. "
                             "E1_north_america.nc or ostia_monthly.nc)")
    args = parser.parse_args(argv)
    dest = Path(args.dest)
    try:
        source = sample_path(args.name or dest.name)
    except FileNotFoundError as err:
        print(f"ncreel: error: {err}", file=sys.stderr)
        return 2
    if dest.exists():
        # Copied again, its modification time would make Snakemake redo every run of it.
        if dest.is_file() and filecmp.cmp(source, dest, shallow=False):
            print(dest)
            return 0
        print(f"ncreel: error: {dest} exists and is not {source.name} of iris-sample-data: "
              "move it away, or give another destination", file=sys.stderr)
        return 2
    dest.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(dest) as tmp:
        shutil.copyfile(source, tmp)
    print(dest)
    return 0


if __name__ == "__main__":
    sys.exit(main())
