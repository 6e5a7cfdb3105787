"""Parse-time checks of the input files' size: truncated files and series too big to run.

A NetCDF-3 file (classic, 64-bit offset or CDF-5) cut short is read by libnetcdf as
fill values or zeros without an error, so its size is checked against what its header
declares, from the header itself (format: "The NetCDF Classic Format Specification",
https://docs.unidata.ucar.edu/netcdf-c/current/file_format_specifications.html). A
NetCDF-4 (HDF5) file cut short fails to open, which :mod:`ncreel.input.source` reports.
Zarr stores (directories) are not NetCDF: the checks here leave them to the store's reader
(:func:`ncreel.input.zarrstore.open_store` and :func:`check_store_opens`).
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from ncreel.core.errors import NcreelError
from ncreel.input.netcdf3 import netcdf3_size, not_utf8_error

#: Longest time axis accepted: the parse and every job hold per-step arrays (decoded
#: times, the shard plan); one million steps is a 23-hour movie at 12 fps.
MAX_TIME_STEPS = 1_000_000


def check_input_sizes(paths: Sequence[str | os.PathLike]) -> None:
    """Stop on a NetCDF-3 input shorter than its header declares, or a corrupt one.

    Any input whose header libnetcdf cannot open without crashing or hanging stops here
    too (:func:`check_opens`).

    Raises
    ------
    NcreelError
        Naming the file, the expected and the actual size in bytes; or the file and what
        libnetcdf did.
    """
    stores = [p for p in paths if os.path.isdir(p)]
    paths = [p for p in paths if not os.path.isdir(p)]
    check_store_opens(stores)
    for path in paths:
        size = netcdf3_size(path)
        if size is not None and size.actual < size.expected:
            raise NcreelError(
                f"input '{os.fspath(path)}': file is truncated: its NetCDF-3 header declares "
                f"{size.expected} bytes ({size.numrecs} records), the file has {size.actual}; "
                "copy it again completely")
    check_opens(paths)


#: Seconds libnetcdf may take to open one file (read its header and every variable's
#: metadata) before :func:`check_opens` takes it for hung; a header is read in well under
#: a second even from a busy parallel file system.
OPEN_TIMEOUT_S = 120.0


def check_opens(paths: Sequence[str | os.PathLike], timeout_s: float | None = None) -> None:
    """Open each file once with libnetcdf in a forked child: stop on one it crashes or hangs on.

    A corrupt file that crashes libnetcdf (a segmentation fault) or makes it loop for ever
    (both seen on byte-flipped files: a corrupt HDF5 structure, a NetCDF-3 dimension
    count) stops the run with one line instead of killing or hanging it.

    Errors libnetcdf reports normally are left to the reader (:func:`ncreel.input.source._open`),
    which names them. A fork costs milliseconds: the child shares what is imported.

    Parameters
    ----------
    paths : sequence of path
        The input files.
    timeout_s : float, optional
        Seconds allowed per file; :data:`OPEN_TIMEOUT_S` when None.

    Raises
    ------
    NcreelError
        Naming the file and whether libnetcdf crashed (the signal) or did not finish.
    """
    import select
    import signal

    import netCDF4

    paths = [os.fspath(p) for p in paths]
    if not paths:
        return
    timeout_s = OPEN_TIMEOUT_S if timeout_s is None else timeout_s
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: open each file, say which one is next, never return
        try:
            os.close(read_fd)
            # Said once, by the parent's own reader: nothing from libnetcdf here, and no
            # Python fault dump (PYTHONFAULTHANDLER, pytest) when it crashes.
            import faulthandler

            faulthandler.disable()
            null = os.open(os.devnull, os.O_WRONLY)
            os.dup2(null, 1)
            os.dup2(null, 2)
            for i, path in enumerate(paths):
                os.write(write_fd, b"%d\n" % i)
                try:
                    netCDF4.Dataset(path).close()
                except BaseException:  # noqa: S110 (reported by the real reader)
                    pass
            os.write(write_fd, b"done\n")
        finally:
            os._exit(0)
    os.close(write_fd)
    said, current, hung = b"", 0, False
    try:
        while True:
            ready, _, _ = select.select([read_fd], [], [], timeout_s)
            if not ready:
                hung = True
                os.kill(pid, signal.SIGKILL)
                break
            chunk = os.read(read_fd, 4096)
            if not chunk:
                break
            said += chunk
            lines = said.split()
            if lines and lines[-1] != b"done":
                current = int(lines[-1])
    finally:
        os.close(read_fd)
        _, status = os.waitpid(pid, 0)
    path = paths[current]
    if hung:
        raise NcreelError(f"input '{path}': libnetcdf did not finish opening it within "
                          f"{timeout_s:g} s: the file is most likely corrupt (copy it again "
                          "completely), or its file system does not answer")
    if os.WIFSIGNALED(status):
        name = signal.Signals(os.WTERMSIG(status)).name
        raise NcreelError(f"input '{path}': libnetcdf crashed ({name}) opening it: the file "
                          "is corrupt; copy it again completely")


def check_store_opens(paths: Sequence[str | os.PathLike]) -> None:
    """Open each Zarr store's metadata (through xarray, as the series will be opened).

    A store whose metadata documents are missing, cut short or not JSON stops here with
    one line naming it (:func:`ncreel.input.zarrstore.open_store`), before any job.

    Raises
    ------
    NcreelError
        Naming the store and what zarr-python said.
    """
    from ncreel.input.zarrstore import open_store

    for path in paths:
        open_store(os.fspath(path)).close()


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
        if os.path.isdir(path):  # a Zarr store: its metadata give the length at once
            from ncreel.input.zarrstore import open_store

            with open_store(os.fspath(path)) as ds:
                if variable not in ds.variables or not ds[variable].dims:
                    return
                dims = ds[variable].dims
                total += int(ds.sizes[time_dim if time_dim in dims else dims[0]])
            continue
        try:
            with netCDF4.Dataset(path) as ds:
                if variable not in ds.variables or not ds.variables[variable].dimensions:
                    return  # ncreel.input.source names the problem
                dims = ds.variables[variable].dimensions
                name = (time_dim if time_dim in dims else
                        next((d for d in dims if ds.dimensions[d].isunlimited()), dims[0]))
                total += len(ds.dimensions[name])
        except OSError:
            return  # not readable: ncreel.input.source names the file and the reason
        except UnicodeDecodeError:  # netCDF4 decodes names strictly
            raise not_utf8_error(path) from None
    if total > MAX_TIME_STEPS:
        raise NcreelError(f"variable '{variable}' has {total} time steps, more than ncreel's "
                          f"limit of {MAX_TIME_STEPS}: split the input into several runs "
                          "(input=a list of fewer files)")


