"""Bundled real sample input: HadCM3 air_temperature from the PyPI package iris-sample-data.

``python -m ncreel.sample DEST`` copies ``A1B_north_america.nc`` (240 annual means
1860-2099, 360-day calendar, 37 x 49 grid; UK Open Government Licence) to DEST.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path


def sample_path(name: str = "A1B_north_america.nc") -> Path:
    """Path of a file shipped in the ``iris_sample_data`` package.

    Raises
    ------
    FileNotFoundError
        If the package or the file is not installed.
    """
    try:
        import iris_sample_data
    except ImportError as err:
        raise FileNotFoundError("pip install iris-sample-data to get the sample input") from err
    path = Path(iris_sample_data.__file__).parent / "sample_data" / name
    if not path.is_file():
        raise FileNotFoundError(f"{path}: not in this iris-sample-data release")
    return path


def main(argv: list[str] | None = None) -> None:
    """Copy the sample file named by ``argv[1]`` (default A1B) to ``argv[0]``."""
    argv = sys.argv[1:] if argv is None else argv
    dest = Path(argv[0] if argv else "resources/A1B_north_america.nc")
    dest.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(sample_path(argv[1] if len(argv) > 1 else dest.name), dest)
    print(dest)


if __name__ == "__main__":
    main()
