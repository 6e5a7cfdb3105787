"""Where the executor keeps its state, and the exit statuses job wrappers record.

Standard library only: the job wrapper's records are read on login nodes too.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

#: Where job wrappers record exit statuses, arrays keep their manifests and the journal
#: lives (relative to the Snakemake working directory).
STATE_DIR = ".snakemake/pbs-pro"

#: Where version 0.1 of this plugin kept its state. Jobs it submitted still record their
#: exit status there, and its journal names them: a run it left may be resumed by this
#: version (:func:`legacy_dirs`).
LEGACY_STATE_DIR = ".snakemake/ncreel-pbs"


def legacy_dirs(state_dir: str | os.PathLike = STATE_DIR) -> list[Path]:
    """Return the state directories of earlier versions next to `state_dir` (read only)."""
    state = Path(state_dir)
    if state.name != Path(STATE_DIR).name:
        return []
    return [state.parent / Path(LEGACY_STATE_DIR).name]


def safe_name(text: str, limit: int = 200) -> str:
    """`text` reduced to ``[A-Za-z0-9_.-]`` (for file names and job names)."""
    out = re.sub(r"[^A-Za-z0-9_.-]", "_", str(text)).strip("._") or "job"
    return out[:limit]

def marker_path(jobid: str, state_dir: str | os.PathLike = STATE_DIR) -> Path:
    """Return the file where the job wrapper records the jobscript's exit status."""
    return Path(state_dir) / f"{safe_name(jobid)}.exit"

def write_marker(jobid: str, status: int, state_dir: str | os.PathLike = STATE_DIR) -> None:
    """Record `status` as the exit status of `jobid` (atomically: temporary name, rename)."""
    path = marker_path(jobid, state_dir)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(f"{status}\n")
    tmp.replace(path)

def read_marker(jobid: str, state_dir: str | os.PathLike = STATE_DIR) -> int | None:
    """Return the recorded exit status of `jobid`, or None if the job did not record one.

    A job submitted by an earlier version recorded it in that version's directory
    (:func:`legacy_dirs`).
    """
    for where in (state_dir, *legacy_dirs(state_dir)):
        try:
            return int(marker_path(jobid, where).read_text().strip())
        except (OSError, ValueError):
            continue
    return None


def marker_statuses(jobids: list[str], state_dir: str | os.PathLike = STATE_DIR
                    ) -> dict[str, str]:
    """Verdicts from the exit statuses job wrappers recorded; ``running`` where none is."""
    out = {}
    for j in jobids:
        marker = read_marker(j, state_dir)
        out[j] = "running" if marker is None else ("success" if marker == 0 else "failed")
    return out
