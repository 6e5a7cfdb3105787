"""NetCDF-3 headers read by hand: the size a file declares, and names that are not UTF-8.

A NetCDF-3 file (classic, 64-bit offset or CDF-5) cut short is read by libnetcdf as
fill values or zeros without an error, so its size is checked against what its header
declares, from the header itself (format: "The NetCDF Classic Format Specification",
https://docs.unidata.ucar.edu/netcdf-c/current/file_format_specifications.html). The same
reading names a dimension, variable or attribute whose name is not UTF-8, which the
netCDF4 library reports only as a ``UnicodeDecodeError``.

Standard library only, and imports nothing of ncreel but its errors: :mod:`ncreel.input.source`
and :mod:`ncreel.input.inputcheck` both use it.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass

from ncreel.core.errors import NcreelError

#: Bytes of one value of each nc_type (1 byte … 11 uint64).
_TYPE_BYTES = {1: 1, 2: 1, 3: 2, 4: 4, 5: 4, 6: 8, 7: 1, 8: 2, 9: 4, 10: 8, 11: 8}
_NC_DIMENSION, _NC_VARIABLE, _NC_ATTRIBUTE = 0x0A, 0x0B, 0x0C
_STREAMING = 0xFFFFFFFF


@dataclass(frozen=True)
class Netcdf3Size:
    """Size of a NetCDF-3 file: what its header declares and what is on disk (bytes)."""

    expected: int
    actual: int
    numrecs: int


class _NotUtf8(Exception):
    """A name in a NetCDF-3 header that is not UTF-8: whose it is, its bytes, where."""

    def __init__(self, owner: str, raw: bytes, at: int):
        super().__init__(owner)
        self.owner, self.raw, self.at = owner, raw, at


def not_utf8_error(path: str | os.PathLike, owner: str | None = None, raw: bytes = b"",
                   at: int = 0) -> NcreelError:
    """Return the one line for a NetCDF file holding a name that is not UTF-8 text.

    NetCDF names are UTF-8 (NetCDF User Guide, "Object names"); netCDF4-python decodes them
    strictly and raises :class:`UnicodeDecodeError`, which no reader can recover from. For
    a NetCDF-3 file the name is found in the header (whose name, its bytes); for
    NetCDF-4/HDF5 only the file is named.

    Parameters
    ----------
    path : path
        The file.
    owner, raw, at
        What the name belongs to (``a dimension``, ``variable 2``, ``an attribute of
        variable 'tas'``), its bytes and the offset of the first byte that is not UTF-8;
        when `owner` is None the NetCDF-3 header is read to find them.

    Returns
    -------
    NcreelError
    """
    if owner is None:
        try:
            netcdf3_size(path)
        except NcreelError as err:
            return err
        except OSError:
            pass
    shown = raw[:40].decode("utf-8", "replace") + ("..." if len(raw) > 40 else "")
    what = (f"the name of {owner}, {shown!r}, has byte "
            f"0x{raw[at]:02x} at position {at}, which is" if owner is not None and raw
            else "a name in its header (a dimension, variable, attribute or group) is")
    return NcreelError(f"input '{os.fspath(path)}': {what} not UTF-8 text, as NetCDF names "
                       "must be: the file is corrupt or was written by a tool that does not "
                       "follow the format; copy it again, or rewrite it with UTF-8 names")


class _Reader:
    def __init__(self, fh, version: int):
        self.fh, self.big = fh, version == 5
        self.offset_bytes = 4 if version == 1 else 8
        #: What the next name belongs to, for the message on a name that is not UTF-8.
        self.owner = "a dimension"

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
        try:
            # The format's names are UTF-8 (NFC); libnetcdf checks none of it on reading.
            return raw[:n].decode("utf-8")
        except UnicodeDecodeError as err:
            raise _NotUtf8(self.owner, raw[:n], err.start) from None

    def skip_attributes(self, owner: str) -> None:
        tag, n = self.tag(), self.non_neg()
        if tag not in (0, _NC_ATTRIBUTE):
            raise ValueError("bad attribute list tag")
        for _ in range(n):
            self.owner = f"an attribute of {owner}"
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
        The header itself is cut short or malformed, or holds a name that is not UTF-8
        (:func:`not_utf8_error`).
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
            for i in range(n_dims):
                r.owner = f"dimension {i + 1}"
                r.name()
                dims.append(r.non_neg())
            r.skip_attributes("the file (a global attribute)")
            tag, n_vars = r.tag(), r.non_neg()
            if tag not in (0, _NC_VARIABLE):
                raise ValueError("bad variable list tag")
            variables = []
            for i in range(n_vars):
                r.owner = f"variable {i + 1}"
                name = r.name()
                dimids = [r.non_neg() for _ in range(r.non_neg())]
                r.skip_attributes(f"variable '{name}'")
                nc_type = r.tag()
                r.non_neg()  # vsize: redundant, and wrong for variables over 4 GiB
                begin = r._int(r.offset_bytes)
                shape = [dims[i] for i in dimids]
                record = bool(shape) and shape[0] == 0
                one = math.prod(shape[1:] if record else shape) * _TYPE_BYTES[nc_type]
                variables.append((record, begin, one))
        except _NotUtf8 as bad:
            raise not_utf8_error(path, bad.owner, bad.raw, bad.at) from None
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
