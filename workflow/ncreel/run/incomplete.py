"""Outputs an interrupted job left behind: marked incomplete by Snakemake, yet present.

Snakemake marks a job's outputs incomplete when the job starts
(``.snakemake/incomplete/<urlsafe base64 of the path>``, split into ``@``-prefixed
directories of at most ``NAME_MAX`` characters; :class:`snakemake.persistence.file.
FilePersistence`) and clears the mark with the job's metadata when it sees the job end.
A run stopped between the two (Ctrl-C just as a job finished, a killed controller whose
scheduler job went on) leaves outputs that exist with the mark and no metadata. Snakemake
checks the marks of the jobs it knows when it first builds the DAG (and redoes them with
``--rerun-incomplete``) but not of jobs it adds once a checkpoint's output is read:
ncreel's shards and everything after them were taken as done, and every later
``--report`` said "Missing metadata" for their outputs. Standard library only.
"""

from __future__ import annotations

import os
from base64 import urlsafe_b64decode, urlsafe_b64encode
from pathlib import Path

#: Snakemake's directory of incomplete marks, relative to the working directory.
INCOMPLETE_DIR = Path(".snakemake") / "incomplete"


def marker_path(workdir: str | os.PathLike, output: str) -> Path:
    """Return the file where Snakemake marks `output` incomplete (it may not exist)."""
    inc = Path(workdir) / INCOMPLETE_DIR
    b64 = urlsafe_b64encode(output.encode()).decode()
    max_len = os.pathconf(inc, "PC_NAME_MAX") if inc.is_dir() else 255
    parts = [b64[i:i + max_len - 1] for i in range(0, len(b64), max_len - 1)]
    return inc.joinpath(*(["@" + p for p in parts[:-1]] + [parts[-1]]))


def marked_incomplete(workdir: str | os.PathLike = ".") -> list[str]:
    """Return every output path Snakemake has marked incomplete in `workdir`, sorted."""
    inc = Path(workdir) / INCOMPLETE_DIR
    found = []
    for root, _, files in os.walk(inc):
        prefix = "".join(p.removeprefix("@") for p in Path(root).relative_to(inc).parts)
        for name in files:
            try:
                found.append(urlsafe_b64decode(prefix + name).decode())
            except (ValueError, UnicodeDecodeError):
                continue  # not a mark (Snakemake's "migration_underway")
    return sorted(found)


def interrupted_outputs(under: str, workdir: str | os.PathLike = ".") -> list[str]:
    """Return the outputs under `under` an interrupted job left: marked and present.

    Parameters
    ----------
    under : str
        A run's output directory as the rules name it (``results/<run>``).
    workdir : path
        Snakemake's working directory.

    Returns
    -------
    list of str
        The paths as Snakemake names them (relative to `workdir`), sorted.
    """
    prefix = under.rstrip("/") + "/"
    return [p for p in marked_incomplete(workdir)
            if p.startswith(prefix) and os.path.lexists(Path(workdir, p))]
