"""Parse-time checks of the input files' size: truncated files and series too big to run.

A NetCDF-3 file (classic, 64-bit offset or CDF-5) cut short is read by libnetcdf as
fill values or zeros without an error, so its size is checked against what its header
declares, from the header itself (format: "The NetCDF Classic Format Specification",
https://docs.unidata.ucar.edu/netcdf-c/current/file_format_specifications.html). A
NetCDF-4 (HDF5) file cut short fails to open, which :mod:`ncreel.source` reports.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from dataclasses import dataclass

from ncreel import resources as res
from ncreel.errors import NcreelError

#: Bytes of one value of each nc_type (1 byte … 11 uint64).
_TYPE_BYTES = {1: 1, 2: 1, 3: 2, 4: 4, 5: 4, 6: 8, 7: 1, 8: 2, 9: 4, 10: 8, 11: 8}
_NC_DIMENSION, _NC_VARIABLE, _NC_ATTRIBUTE = 0x0A, 0x0B, 0x0C
_STREAMING = 0xFFFFFFFF
#: Longest time axis accepted: the parse and every job hold per-step arrays (decoded
#: times, the shard plan); one million steps is a 23-hour movie at 12 fps.
MAX_TIME_STEPS = 1_000_000


@dataclass(frozen=True)
class Netcdf3Size:
    """Size of a NetCDF-3 file: what its header declares and what is on disk (bytes)."""

    expected: int
    actual: int
    numrecs: int


class _Reader:
    def __init__(self, fh, version: int):
        self.fh, self.big = fh, version == 5
        self.offset_bytes = 4 if version == 1 else 8

    def _int(self, n: int) -> int:
        raw = self.fh.read(n)
        if len(raw) != n:
            raise EOFError
        return int.from_bytes(raw, "big")

    def tag(self) -> int:
        return self._int(4)

    def non_neg(self) -> int:
        return self._int(8 if self.big else 4)

    def name(self) -> str:
        n = self.non_neg()
        raw = self.fh.read(n + (-n % 4))
        if len(raw) != n + (-n % 4):
            raise EOFError
        return raw[:n].decode("utf-8", "replace")

    def skip_attributes(self) -> None:
        tag, n = self.tag(), self.non_neg()
        if tag not in (0, _NC_ATTRIBUTE):
            raise ValueError("bad attribute list tag")
        for _ in range(n):
            self.name()
            nc_type, count = self.tag(), self.non_neg()
            size = _TYPE_BYTES[nc_type] * count
            self.fh.seek(size + (-size % 4), os.SEEK_CUR)


def netcdf3_size(path: str | os.PathLike) -> Netcdf3Size | None:
    """Read a NetCDF-3 header and return the file size it implies.

    The expected size is the end of the last byte of data: for a fixed-size variable
    ``begin + product(shape) * type size``; for record variables the last record's
    ``begin + (numrecs - 1) * recsize + one record's size``, where ``recsize`` is the sum
    of the record variables' 4-byte-padded record sizes (unpadded when there is only one).

    Parameters
    ----------
    path : path
        Any file.

    Returns
    -------
    Netcdf3Size or None
        None when the file is not NetCDF-3 (e.g. NetCDF-4/HDF5) or declares streaming
        (``numrecs`` unknown).

    Raises
    ------
    NcreelError
        The header itself is cut short or malformed.
    """
    with open(path, "rb") as fh:
        magic = fh.read(4)
        if len(magic) < 4 or magic[:3] != b"CDF" or magic[3] not in (1, 2, 5):
            return None
        r = _Reader(fh, magic[3])
        try:
            numrecs = r.non_neg()
            if numrecs == _STREAMING or (r.big and numrecs == 2**64 - 1):
                return None
            tag, n_dims = r.tag(), r.non_neg()
            if tag not in (0, _NC_DIMENSION):
                raise ValueError("bad dimension list tag")
            dims = []
            for _ in range(n_dims):
                r.name()
                dims.append(r.non_neg())
            r.skip_attributes()
            tag, n_vars = r.tag(), r.non_neg()
            if tag not in (0, _NC_VARIABLE):
                raise ValueError("bad variable list tag")
            variables = []
            for _ in range(n_vars):
                r.name()
                dimids = [r.non_neg() for _ in range(r.non_neg())]
                r.skip_attributes()
                nc_type = r.tag()
                r.non_neg()  # vsize: redundant, and wrong for variables over 4 GiB
                begin = r._int(r.offset_bytes)
                shape = [dims[i] for i in dimids]
                record = bool(shape) and shape[0] == 0
                one = math.prod(shape[1:] if record else shape) * _TYPE_BYTES[nc_type]
                variables.append((record, begin, one))
        except (EOFError, ValueError, KeyError, IndexError):
            raise NcreelError(f"input '{os.fspath(path)}': NetCDF-3 header is truncated or "
                              "malformed; replace the file with a complete copy") from None
        actual = os.fstat(fh.fileno()).st_size
    records = [v for v in variables if v[0]]
    recsize = (records[0][2] if len(records) == 1
               else sum(one + (-one % 4) for _, _, one in records))
    ends = [begin + one for record, begin, one in variables if not record]
    if numrecs:
        ends += [begin + (numrecs - 1) * recsize + one for _, begin, one in records]
    return Netcdf3Size(expected=max(ends, default=0), actual=actual, numrecs=numrecs)


def check_input_sizes(paths: Sequence[str | os.PathLike]) -> None:
    """Stop on a NetCDF-3 input shorter than its header declares.

    Raises
    ------
    NcreelError
        Naming the file, the expected and the actual size in bytes.
    """
    for path in paths:
        size = netcdf3_size(path)
        if size is not None and size.actual < size.expected:
            raise NcreelError(
                f"input '{os.fspath(path)}': file is truncated: its NetCDF-3 header declares "
                f"{size.expected} bytes ({size.numrecs} records), the file has {size.actual}; "
                "copy it again completely")


def check_time_steps(paths: Sequence[str | os.PathLike], variable: str,
                     time_dim: str | None = None) -> None:
    """Stop on a time axis longer than :data:`MAX_TIME_STEPS`, from the headers alone.

    Runs before the series is opened, because opening reads the whole time coordinate.
    The time dimension is `time_dim` if given, else the variable's unlimited dimension,
    else its first (CF/COARDS order T, Z, Y, X).

    Raises
    ------
    NcreelError
        Naming the number of steps and the limit.
    """
    import netCDF4

    total = 0
    for path in paths:
        try:
            with netCDF4.Dataset(path) as ds:
                if variable not in ds.variables or not ds.variables[variable].dimensions:
                    return  # ncreel.source names the problem
                dims = ds.variables[variable].dimensions
                name = (time_dim if time_dim in dims else
                        next((d for d in dims if ds.dimensions[d].isunlimited()), dims[0]))
                total += len(ds.dimensions[name])
        except OSError:
            return  # not readable: ncreel.source names the file and the reason
    if total > MAX_TIME_STEPS:
        raise NcreelError(f"variable '{variable}' has {total} time steps, more than ncreel's "
                          f"limit of {MAX_TIME_STEPS}: split the input into several runs "
                          "(input=a list of fewer files)")


def check_series_size(*, n_time: int, ny: int, nx: int, variable: str,
                      mem_cap_mb: float | None) -> None:
    """Stop, before any job, on a series no job can hold within the memory cap.

    Parameters
    ----------
    n_time, ny, nx : int
        The series' shape.
    variable : str
        Its name, for the message.
    mem_cap_mb : float or None
        The largest ``mem_mb`` one job may declare (Snakemake's ``--resources mem_mb``,
        which silently lowers a larger request to it); None for no cap.

    Raises
    ------
    NcreelError
        More than :data:`MAX_TIME_STEPS` steps, or the statistics job (per-cell
        accumulators) or a process_shard's rows pass (one whole time step) needs more
        than `mem_cap_mb`; the message names the size and the limit.
    """
    if n_time > MAX_TIME_STEPS:
        raise NcreelError(f"variable '{variable}' has {n_time} time steps, more than ncreel's "
                          f"limit of {MAX_TIME_STEPS}: split the input into several runs")
    if mem_cap_mb is None:
        return
    needs = {"statistics": res.statistics_mem_mb(ny=ny, nx=nx),
             "process_shard": res.rows_step_mem_mb(ny=ny, nx=nx)}
    for rule, mem_mb in needs.items():
        if mem_mb > mem_cap_mb:
            raise NcreelError(
                f"variable '{variable}' has a {ny} x {nx} grid: the {rule} job needs about "
                f"{mem_mb} MB, more than the mem_mb limit of {int(mem_cap_mb)} "
                "(--resources mem_mb / the profile's resources): select a smaller region, "
                "or run on a node with more memory and raise the limit")
