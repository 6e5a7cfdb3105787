"""PBS job arrays: which ready jobs share one array, and the manifest its sub-jobs read."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from snakemake_executor_plugin_pbs_pro.state import STATE_DIR

#: Where manifests of job arrays are written (relative to the working directory).
ARRAY_DIR = f"{STATE_DIR}/arrays"

def batch_key(props: dict) -> tuple:
    """Jobs with equal keys can share one job array (same rule and resource request)."""
    res = props.get("resources") or {}
    return (props.get("rule"), props.get("threads"), res.get("mem_mb"), res.get("runtime"))

def sha256(path: str | os.PathLike) -> str:
    """Hex SHA-256 of a file's bytes."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()

def write_manifest(path: str | os.PathLike, entries: list[dict]) -> Path:
    """Write an array batch's manifest: entry ``i`` is what sub-job ``i`` runs.

    Each entry holds ``index``, the Snakemake ``jobid``, ``rule``, ``wildcards``, the
    absolute ``jobscript`` and its ``sha256`` (:mod:`.subjob` checks all of them).
    Written under a temporary name and renamed, so a sub-job never reads half of it.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps({"version": 1, "jobs": entries}, indent=1))
    tmp.replace(path)
    return path
