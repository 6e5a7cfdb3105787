"""Which version of each input file a run was planned from, and the check every job makes.

A run reads its inputs many times: the statistics pass, the calibration, every shard job.
If a file is replaced in between (a re-downloaded month, a regridded copy under the same
name), outputs mixed from two versions would look complete. So the statistics job records
each input's *identity* in ``stats.json`` — size, modification time and a digest of its
header and coordinates — and every later job that reads the inputs compares the files with
it before reading (:func:`check_inputs`), stopping with one line naming the file.

The digest covers what decides how a file is read: dimensions and their sizes, every
variable's name, type, dimensions and attributes, and the values of 1-D coordinate
variables (time, latitude, longitude, levels). Data values are not hashed (that would read
the whole file): a file rewritten with the same header, size and modification time is
not detected.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable, Mapping

import numpy as np

from ncreel.errors import NcreelError

#: Coordinate variables larger than this many values are hashed by shape and ends only.
MAX_HASHED_VALUES = 1_000_000


def _hash_group(h, group) -> None:
    for name, dim in group.dimensions.items():
        h.update(f"dim {name} {len(dim)} {dim.isunlimited()}\n".encode())
    for name, var in group.variables.items():
        attrs = {k: var.getncattr(k) for k in var.ncattrs()}
        h.update(f"var {name} {var.dtype} {var.dimensions} "
                 f"{sorted((k, repr(v)) for k, v in attrs.items())}\n".encode())
        if var.ndim == 1 and var.dimensions[0] == name or name in _coordinate_names(group):
            var.set_auto_maskandscale(False)
            if var.size <= MAX_HASHED_VALUES:
                h.update(np.ascontiguousarray(var[...]).tobytes())
            else:
                h.update(np.ascontiguousarray(var[:2]).tobytes())
                h.update(np.ascontiguousarray(var[-2:]).tobytes())
    for sub in group.groups.values():
        h.update(f"group {sub.name}\n".encode())
        _hash_group(h, sub)


def _coordinate_names(group) -> set[str]:
    # Auxiliary coordinates named in any variable's CF `coordinates` attribute.
    names: set[str] = set()
    for var in group.variables.values():
        if "coordinates" in var.ncattrs():
            names.update(str(var.getncattr("coordinates")).split())
    return names


def header_digest(path: str | os.PathLike) -> str:
    """SHA-256 of a NetCDF file's header and coordinate values (see the module docstring).

    Raises
    ------
    NcreelError
        If the file cannot be opened as NetCDF.
    """
    import netCDF4

    h = hashlib.sha256()
    try:
        with netCDF4.Dataset(os.fspath(path)) as nc:
            _hash_group(h, nc)
    except (OSError, RuntimeError, ValueError) as err:
        raise NcreelError(f"input '{path}': cannot read its header ({err})") from err
    return h.hexdigest()


def file_identity(path: str | os.PathLike) -> dict:
    """Identity of one input file: ``{path, size, mtime_ns, digest}``.

    Returns
    -------
    dict
        ``size`` in bytes, ``mtime_ns`` (nanoseconds since the epoch, as ``os.stat``),
        ``digest`` from :func:`header_digest`.
    """
    st = os.stat(path)
    return {"path": os.fspath(path), "size": st.st_size, "mtime_ns": st.st_mtime_ns,
            "digest": header_digest(path)}


def input_stamps(paths: Iterable[str | os.PathLike]) -> list[list]:
    """``[path, size, mtime_ns]`` of each path: the cheap part of an identity (no file read).

    Used as the statistics rule's params, so that Snakemake reruns the run from a file
    replaced by one with an older modification time.
    """
    out = []
    for p in paths:
        st = os.stat(p)
        out.append([os.fspath(p), st.st_size, st.st_mtime_ns])
    return out


def input_identities(paths: Iterable[str | os.PathLike]) -> list[dict]:
    """:func:`file_identity` of each path, in order."""
    return [file_identity(p) for p in paths]


def _what_changed(old: Mapping, path: str) -> str | None:
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return "it no longer exists"
    except OSError as err:
        return f"it cannot be read ({err.strerror})"
    if st.st_size != old["size"]:
        return f"its size changed from {old['size']} to {st.st_size} bytes"
    if st.st_mtime_ns != old["mtime_ns"]:
        return "it was modified (its modification time changed)"
    if header_digest(path) != old["digest"]:
        return "its header or coordinates changed"
    return None


def check_inputs(recorded: Iterable[Mapping], paths: Iterable[str] | None = None) -> None:
    """Stop when an input differs from the version the run's statistics were computed from.

    Parameters
    ----------
    recorded : iterable of mapping
        The ``inputs`` list of ``stats.json`` (:func:`input_identities` at that time).
    paths : iterable of str, optional
        The files the job is about to read; default: all recorded ones. A path not
        recorded means the set of inputs changed.

    Raises
    ------
    NcreelError
        Naming the first changed file and what changed, and what to do.
    """
    recorded = list(recorded)
    by_path = {r["path"]: r for r in recorded}
    for path in (list(paths) if paths is not None else list(by_path)):
        old = by_path.get(path)
        why = ("it was not among the run's inputs when its statistics were computed"
               if old is None else _what_changed(old, path))
        if why:
            raise NcreelError(
                f"input '{path}' changed after this run's statistics were computed ({why}): "
                "outputs from two versions of the input would be mixed, so this job stops; "
                "run the same command again to redo the run from the file as it is now")


def check_against_stats(stats_json: str | os.PathLike) -> None:
    """:func:`check_inputs` with the identities recorded in a run's ``stats.json``.

    A ``stats.json`` written before identities were recorded has none: nothing is checked.

    Raises
    ------
    NcreelError
        As :func:`check_inputs`.
    """
    import json

    with open(stats_json) as fh:
        check_inputs(json.load(fh).get("inputs", []))
