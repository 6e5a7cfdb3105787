"""Small file-system helpers shared by the rules' outputs."""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

#: Attribute :func:`atomic_path` gives an exception raised while writing: the output it
#: was writing (the innermost), so that a job failing on a full disk names it
#: (:func:`ncreel.core.errors.disk_full_line`).
OUTPUT_ATTR = "ncreel_output"


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary sibling of `path`, renamed onto `path` only on success.

    A killed or failed job therefore never leaves a half-written file (or directory)
    under the final name, which is what lets a rerun trust every output it finds.

    Parameters
    ----------
    path : str or path-like
        Final file or directory name.

    Yields
    ------
    pathlib.Path
        ``<path>.part``: write here. A stale one from an earlier killed run is removed first.
    """
    final = Path(path)
    tmp = final.with_name(final.name + ".part")
    _remove(tmp)
    final.parent.mkdir(parents=True, exist_ok=True)
    try:
        yield tmp
    except BaseException as exc:
        if not hasattr(exc, OUTPUT_ATTR):
            with contextlib.suppress(AttributeError, TypeError):
                setattr(exc, OUTPUT_ATTR, os.fspath(final))
        _remove(tmp)
        raise
    if final.is_dir() and not final.is_symlink():
        # Snakemake may have created an empty directory() output; replace it.
        shutil.rmtree(final)
    os.replace(tmp, final)


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    elif path.exists() or path.is_symlink():
        path.unlink()
