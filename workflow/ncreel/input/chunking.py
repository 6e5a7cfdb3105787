"""How a variable is chunked along time, and what reading one chunk costs.

A compressed chunk (also one with a checksum, and every chunk of a Zarr store) is decoded
whole, whatever part of it a read takes: reading one time step of a variable stored in
chunks of 24 steps decodes all 24. :func:`time_chunking` describes one file's variable;
:class:`ncreel.input.source.Series` reads each such chunk once (it holds the rest of the
last chunk a read ended in, up to :data:`MAX_HELD_BYTES`), ``ncreel inspect`` prints what
a chunk costs, and :mod:`ncreel.run.resources` counts the chunk held.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import xarray as xr

#: Largest part of a time chunk a series holds for its next reads (decoded bytes): a
#: chunk larger than this (a file chunked along its whole time axis) is decoded again by
#: every read, as it would be without holding.
MAX_HELD_BYTES = 256 * 2**20

#: NetCDF-4/HDF5 filters (xarray's encoding keys, netCDF4 and h5netcdf backends) after
#: which a chunk is only readable whole: compression, and the fletcher32 checksum.
WHOLE_CHUNK_FILTERS = ("zlib", "szip", "zstd", "bzip2", "blosc", "compression", "fletcher32")


@dataclass(frozen=True)
class Chunking:
    """A variable's chunks in one file (or Zarr store).

    Attributes
    ----------
    dims : tuple of str
        The variable's dimensions, in the file's order.
    shape : tuple of int
        Its sizes.
    chunks : tuple of int or None
        The chunk shape in the same order; None when the variable is stored contiguous
        (classic NetCDF, or NetCDF-4 without chunking).
    time_dim : str
    filters : tuple of str
        Of :data:`WHOLE_CHUNK_FILTERS`, those the variable has (``zarr`` for a store,
        whose chunks are always read whole). Without any, HDF5 reads the part of a chunk
        asked for, and nothing is decoded twice.
    itemsize : int
        Bytes of one value as read (after CF mask-and-scale decoding).
    """

    dims: tuple
    shape: tuple
    chunks: tuple | None
    time_dim: str
    filters: tuple
    itemsize: int

    @property
    def time_chunk(self) -> int | None:
        """Steps of one chunk along time (at most the file's steps); None when not chunked."""
        if self.chunks is None or self.time_dim not in self.dims:
            return None
        k = self.dims.index(self.time_dim)
        return min(int(self.chunks[k]), int(self.shape[k])) or None

    @property
    def read_whole(self) -> int | None:
        """Steps a read decodes at least; None when a step can be read alone.

        The time chunk, when chunks are read whole and hold more than one step.
        """
        steps = self.time_chunk
        return steps if self.filters and steps and steps > 1 else None

    @property
    def whole_axis(self) -> bool:
        """Whether one chunk holds every time step of the file (and more than one)."""
        steps = self.read_whole
        return steps is not None and steps == int(self.shape[self.dims.index(self.time_dim)])

    def chunk_bytes(self) -> int:
        """Return the decoded bytes of one chunk (0 when not chunked)."""
        if self.chunks is None:
            return 0
        return math.prod(min(int(c), int(s)) for c, s in zip(self.chunks, self.shape,
                                                              strict=True)) * self.itemsize

    def describe(self) -> str:
        """``(24, 721, 1440) along (time, lat, lon), zlib`` or ``contiguous (not chunked)``."""
        if self.chunks is None:
            return "contiguous (not chunked)"
        how = ", ".join("Zarr store" if f == "zarr" else f for f in self.filters)
        return (f"({', '.join(map(str, self.chunks))}) along ({', '.join(self.dims)}), "
                f"{how or 'not compressed'}")


def time_chunking(da: xr.DataArray, time_dim: str, *, store: bool = False) -> Chunking:
    """Describe how `da` (one file's variable, opened by xarray) is chunked.

    Parameters
    ----------
    da : xarray.DataArray
        As opened from the file (its ``encoding`` holds the file's chunking).
    time_dim : str
        Its time dimension.
    store : bool
        `da` comes from a Zarr store (``encoding['chunks']``; chunks read whole); else a
        NetCDF file (``encoding['chunksizes']`` and its filters).

    Returns
    -------
    Chunking
    """
    enc = da.encoding
    chunks = enc.get("chunks") if store else enc.get("chunksizes")
    if not chunks or len(chunks) != da.ndim:
        chunks = None
    filters = ("zarr",) if store else tuple(k for k in WHOLE_CHUNK_FILTERS if enc.get(k))
    return Chunking(dims=tuple(map(str, da.dims)), shape=tuple(int(n) for n in da.shape),
                    chunks=None if chunks is None else tuple(int(c) for c in chunks),
                    time_dim=str(time_dim), filters=filters,
                    itemsize=int(np.dtype(da.dtype).itemsize))
