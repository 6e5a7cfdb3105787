"""Zarr stores as input: local directory stores, Zarr format 2 and 3, consolidated or not.

A store is a directory whose root holds ``zarr.json`` (format 3) or ``.zgroup``/``.zarray``
(format 2; ``.zmetadata`` when its metadata are consolidated) -- the Zarr specifications,
https://zarr-specs.readthedocs.io. :mod:`ncreel.input.source` opens it with xarray's zarr
backend (zarr-python) where it opens a NetCDF file, so a store is one more file of a
series. What a store needs besides: whether a directory is one (:func:`store_format`), its
stamp and digest for the replaced-input check (:func:`store_stamp`, :func:`store_digest`:
metadata and chunk listing, never every byte) and its groups (for messages).
"""

from __future__ import annotations

import hashlib
import json
import os

import xarray as xr

from ncreel.core.errors import NcreelError

#: Metadata documents of both formats (their content is hashed; chunks by name and size).
METADATA = frozenset({"zarr.json", ".zgroup", ".zarray", ".zattrs", ".zmetadata"})


def store_format(path: str | os.PathLike) -> int | None:
    """Zarr format (2 or 3) of the directory store at `path`; None when it is not one."""
    path = os.fspath(path)
    if not os.path.isdir(path):
        return None
    if os.path.isfile(os.path.join(path, "zarr.json")):
        return 3
    if any(os.path.isfile(os.path.join(path, n)) for n in (".zgroup", ".zarray")):
        return 2
    return None


def not_a_store_message(path: str) -> str:
    """Why the directory `path` is no input: not a store, or a folder of files."""
    if path.rstrip("/").endswith(".zarr"):
        return (f"input '{path}': a directory named like a Zarr store, but not one: it has "
                "no zarr.json (Zarr format 3) nor .zgroup/.zarray (format 2) at its top; "
                "name the store's root directory, or copy the store again completely")
    return (f"input '{path}': is a directory, neither a NetCDF file nor a Zarr store (no "
            f"zarr.json, .zgroup or .zarray in it): name its files, e.g. "
            f"input='{os.path.join(path, '*.nc')}'")


def _consolidated(path: str, fmt: int) -> bool:
    if fmt == 2:
        return os.path.isfile(os.path.join(path, ".zmetadata"))
    try:
        with open(os.path.join(path, "zarr.json"), encoding="utf-8") as fh:
            return bool(json.load(fh).get("consolidated_metadata"))
    except (OSError, ValueError, AttributeError):
        return False  # zarr-python names the problem when the store is opened


def open_store(path: str, group: str | None = None) -> xr.Dataset:
    """Open the store at `path` (or its `group`) lazily, as a NetCDF file is opened.

    No dask: reads go through xarray's lazy indexing to zarr-python, chunk by chunk.
    ``decode_times=False`` (ncreel decodes time itself) and CF mask-and-scale, as for
    NetCDF.

    Raises
    ------
    NcreelError
        Not a store, an unreadable or corrupt metadata document, a missing group (listing
        the store's groups).
    """
    fmt = store_format(path)
    if fmt is None:
        raise NcreelError(not_a_store_message(path))
    try:
        import zarr  # noqa: F401 (xarray's zarr backend)
    except ImportError:
        raise NcreelError(f"input '{path}': a Zarr store, and this environment has no "
                          "zarr-python: install ncreel's dependencies (make venv)") from None
    try:
        return xr.open_dataset(path, engine="zarr", group=group, chunks=None,
                               consolidated=_consolidated(path, fmt), zarr_format=fmt,
                               decode_times=False, mask_and_scale=True)
    except FileNotFoundError as err:
        if group:
            raise NcreelError(f"input '{path}': no group '{group}' (groups: "
                              f"{', '.join(store_groups(path)) or 'none'})") from err
        raise NcreelError(f"input '{path}': not a readable Zarr store ({err}); copy it "
                          "again completely") from err
    except Exception as err:  # zarr-python raises many types for a broken store
        raise NcreelError(f"input '{path}': not a readable Zarr store (format {fmt}): "
                          f"{type(err).__name__}: {' '.join(str(err).split())[:300]}; copy "
                          "it again completely") from err


def store_groups(path: str) -> list[str]:
    """Paths of the groups below the store's root (``a``, ``a/b``), for messages."""
    found = []
    for root, dirs, files in os.walk(path):
        dirs.sort()
        rel = os.path.relpath(root, path)
        if rel == ".":
            continue
        if ".zgroup" in files:
            found.append(rel.replace(os.sep, "/"))
        elif "zarr.json" in files:
            try:
                with open(os.path.join(root, "zarr.json"), encoding="utf-8") as fh:
                    if json.load(fh).get("node_type") == "group":
                        found.append(rel.replace(os.sep, "/"))
            except (OSError, ValueError, AttributeError):
                pass
    return found


def _walk(path: str):
    """``(relative path, os.stat_result)`` of every file of the store, in name order."""
    for root, dirs, files in os.walk(path):
        dirs.sort()
        for name in sorted(files):
            full = os.path.join(root, name)
            yield os.path.relpath(full, path).replace(os.sep, "/"), os.stat(full)


def store_stamp(path: str | os.PathLike) -> tuple[int, int]:
    """``(size, mtime_ns)`` of a store: its files' total bytes and their latest change.

    The cheap part of its identity (as ``os.stat`` is of a file): a chunk rewritten,
    added or removed changes one of them, the directories' own times included (a
    removed chunk changes its directory's).
    """
    path = os.fspath(path)
    size, latest = 0, os.stat(path).st_mtime_ns
    for root, _, _ in os.walk(path):
        latest = max(latest, os.stat(root).st_mtime_ns)
    for _, st in _walk(path):
        size += st.st_size
        latest = max(latest, st.st_mtime_ns)
    return size, latest


def store_digest(path: str | os.PathLike) -> str:
    """SHA-256 of a store's metadata documents and its chunk listing (names and sizes).

    What decides how the store is read -- every ``zarr.json``/``.zarray``/``.zattrs``/
    ``.zgroup``/``.zmetadata`` (dimensions, shapes, chunking, codecs, attributes) -- and
    which chunks exist with what size. Chunk bytes are not read: a chunk rewritten with
    the same size is caught by :func:`store_stamp`'s modification time only.
    """
    path = os.fspath(path)
    h = hashlib.sha256()
    for rel, st in _walk(path):
        if os.path.basename(rel) in METADATA:
            with open(os.path.join(path, rel), "rb") as fh:
                h.update(f"meta {rel}\n".encode())
                h.update(fh.read())
        else:
            h.update(f"chunk {rel} {st.st_size}\n".encode())
    return h.hexdigest()
