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

A Zarr store (a directory) has the same identity, made of its metadata documents and its
chunk listing (:func:`ncreel.input.zarrstore.store_digest`) and of its files' total size and
latest modification time (:func:`ncreel.input.zarrstore.store_stamp`).
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable, Mapping, Sequence

import numpy as np

from ncreel.core.errors import NcreelError

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
            if var.dtype is str or np.dtype(var.dtype).kind in "OSU":
                # Text (ISO dates): the strings, not the bytes of Python objects.
                texts = np.ravel(np.ma.getdata(var[...]))
                h.update("\0".join(map(str, texts)).encode("utf-8", "surrogateescape"))
                continue
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


def _digest_here(path: str) -> str:
    import netCDF4

    if os.path.isdir(path):
        from ncreel.input.zarrstore import store_digest

        return store_digest(path)
    h = hashlib.sha256()
    with netCDF4.Dataset(path) as nc:
        _hash_group(h, nc)
    return h.hexdigest()


def header_digests(paths: Sequence[str | os.PathLike]) -> list[str]:
    """SHA-256 of each NetCDF file's header and coordinate values (module docstring).

    Computed in a child process: a job calls this while it has the same files open
    through xarray, and a second netCDF-4/HDF5 handle to an open file in one process
    closes the first one's objects when it is closed (a crash at the next read).

    Returns
    -------
    list of str
        64 hexadecimal digits per path, in order.

    Raises
    ------
    NcreelError
        If a file cannot be opened as NetCDF (naming it).
    """
    import subprocess
    import sys

    paths = [os.fspath(p) for p in paths]
    if not paths:
        return []
    # workflow/: the folder holding the ncreel package (this file is ncreel/input/identity.py).
    package_root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [package_root, *filter(None, [os.environ.get("PYTHONPATH")])])}
    proc = subprocess.run([sys.executable, "-m", "ncreel.input.identity"], input=json.dumps(paths),
                          capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        raise NcreelError(proc.stderr.strip().splitlines()[-1] if proc.stderr.strip()
                          else f"cannot read the headers of {paths[0]} ...")
    return json.loads(proc.stdout)


def header_digest(path: str | os.PathLike) -> str:
    """:func:`header_digests` of one file."""
    return header_digests([path])[0]


def file_identity(path: str | os.PathLike) -> dict:
    """Identity of one input file: ``{path, size, mtime_ns, digest}``.

    Returns
    -------
    dict
        ``size`` in bytes, ``mtime_ns`` (nanoseconds since the epoch, as ``os.stat``),
        ``digest`` from :func:`header_digests`.
    """
    return input_identities([path])[0]


def input_stamps(paths: Iterable[str | os.PathLike]) -> list[list]:
    """``[path, size, mtime_ns]`` of each path: the cheap part of an identity (no file read).

    Used as the statistics rule's params, so that Snakemake reruns the run from a file
    replaced by one with an older modification time.
    """
    return [[os.fspath(p), *_stamp(p)] for p in paths]


def _stamp(path: str | os.PathLike) -> tuple[int, int]:
    """``(size, mtime_ns)`` of a file, or of a Zarr store's files taken together."""
    if os.path.isdir(path):
        from ncreel.input.zarrstore import store_stamp

        return store_stamp(path)
    st = os.stat(path)
    return st.st_size, st.st_mtime_ns


def input_identities(paths: Iterable[str | os.PathLike]) -> list[dict]:
    """:func:`file_identity` of each path, in order (one child process for all digests)."""
    paths = [os.fspath(p) for p in paths]
    stats = [_stamp(p) for p in paths]
    digests = header_digests(paths)
    return [{"path": p, "size": size, "mtime_ns": mtime, "digest": d}
            for p, (size, mtime), d in zip(paths, stats, digests, strict=True)]


def _stat_change(old: Mapping, path: str) -> str | None:
    try:
        size, mtime = _stamp(path)
    except FileNotFoundError:
        return "it no longer exists"
    except OSError as err:
        return f"it cannot be read ({err.strerror})"
    if size != old["size"]:
        return f"its size changed from {old['size']} to {size} bytes"
    if mtime != old["mtime_ns"]:
        return "it was modified (its modification time changed)"
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
    by_path = {r["path"]: r for r in recorded}
    paths = list(paths) if paths is not None else list(by_path)
    changes: dict[str, str] = {}
    for path in paths:
        old = by_path.get(path)
        why = ("it was not among the run's inputs when its statistics were computed"
               if old is None else _stat_change(old, path))
        if why:
            changes[path] = why
    same_stat = [p for p in paths if p not in changes]
    for path, digest in zip(same_stat, header_digests(same_stat), strict=True):
        if digest != by_path[path]["digest"]:
            changes[path] = "its header or coordinates changed"
    for path in paths:  # the first changed one, in the job's order
        if path in changes:
            raise NcreelError(
                f"input '{path}' changed after this run's statistics were computed "
                f"({changes[path]}): outputs from two versions of the input would be mixed, "
                "so this job stops; run the same command again to redo the run from the "
                "file as it is now")


def check_against_stats(stats_json: str | os.PathLike) -> None:
    """:func:`check_inputs` with the identities recorded in a run's ``stats.json``.

    A ``stats.json`` written before identities were recorded has none: nothing is checked.

    Raises
    ------
    NcreelError
        As :func:`check_inputs`.
    """
    with open(stats_json) as fh:
        check_inputs(json.load(fh).get("inputs", []))


def _main() -> int:
    # Child of header_digests: JSON list of paths on stdin, JSON list of digests on stdout.
    import sys

    out = []
    for path in json.loads(sys.stdin.read()):
        try:
            out.append(_digest_here(path))
        except (OSError, RuntimeError, ValueError) as err:
            print(f"input '{path}': cannot read its header ({err})", file=sys.stderr)
            return 1
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(_main())
