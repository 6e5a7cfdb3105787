"""A byte-mutation fuzzer for ncreel's input checks (NetCDF-3 and NetCDF-4 files).

Small real files are mutated with a fixed seed — bit flips (mostly in the header, where
the structure is), truncations, and non-UTF-8 bytes written over names and attribute
text — and each mutant goes through a check in a forked child process with a timeout, so a
crash, a hang or a traceback in one file is seen as such and never stops the others. The
parent imports everything once before forking, so a child costs milliseconds, not the
seconds of a fresh interpreter.

Every mutant must end in one of two ways: accepted (exit status 0), or exactly one
``ncreel: error: …`` line that names the file (and nothing else but ``ncreel: note:`` or
``ncreel: warning:`` lines). Anything else is a failure of its kind: ``traceback``,
``hang``, ``crash`` (killed by a signal), ``noise`` (other output, e.g. a library's own
error stack) or ``unnamed`` (an error line that does not name the file).
"""

from __future__ import annotations

import faulthandler
import os
import random
import re
import signal
import sys
import tempfile
import time
import traceback
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import netCDF4
import numpy as np

SITE = Path(np.__file__).resolve().parents[1]
#: A real NetCDF-3 classic series (time, latitude, longitude) and a real NetCDF-4 file.
EOFS_SST = SITE / "eofs" / "examples" / "example_data" / "sst_ndjfm_anom.nc"
IRIS_ROTATED = SITE / "iris_sample_data" / "sample_data" / "rotated_pole.nc"

#: Bytes no UTF-8 text holds at these places (a lone continuation byte, 0xFE, 0xFF).
NON_UTF8 = (b"\xff", b"\xfe", b"\x80", b"\xc3\x28", b"\xed\xa0\x80")


def write_series(path: Path, fmt: str) -> Path:
    """A tiny CF series ``tas(time, lat, lon)``, 6 steps of 4 x 5, in NetCDF format `fmt`.

    NetCDF-4 files are compressed (zlib) with one chunk per time step, so a flipped byte
    in the data lands in a compressed chunk.
    """
    nc4 = fmt.startswith("NETCDF4")
    with netCDF4.Dataset(path, "w", format=fmt) as ds:
        ds.title = "fuzz base"
        ds.Conventions = "CF-1.8"
        ds.createDimension("time", None)
        ds.createDimension("lat", 4)
        ds.createDimension("lon", 5)
        t = ds.createVariable("time", "f8", ("time",))
        t.units, t.calendar, t.standard_name, t.axis = ("days since 2000-01-01", "standard",
                                                        "time", "T")
        la = ds.createVariable("lat", "f4", ("lat",))
        la.units, la.standard_name = "degrees_north", "latitude"
        lo = ds.createVariable("lon", "f4", ("lon",))
        lo.units, lo.standard_name = "degrees_east", "longitude"
        kw = {"zlib": True, "complevel": 4, "chunksizes": (1, 4, 5)} if nc4 else {}
        v = ds.createVariable("tas", "f4", ("time", "lat", "lon"), fill_value=1e20, **kw)
        v.units, v.long_name, v.standard_name = "K", "air temperature", "air_temperature"
        la[:] = [10, 20, 30, 40]
        lo[:] = [0, 30, 60, 90, 120]
        t[:] = np.arange(6)
        v[:] = 250 + np.arange(6 * 4 * 5, dtype="f4").reshape(6, 4, 5) / 10
    return path


def base_files(directory: Path) -> list[tuple[Path, str]]:
    """``(path, variable)`` of the files to mutate: written NetCDF-3 (classic, 64-bit
    offset) and NetCDF-4 series, the eofs NetCDF-3 example and the iris NetCDF-4 sample."""
    directory.mkdir(parents=True, exist_ok=True)
    out = [(write_series(directory / "nc3_classic.nc", "NETCDF3_CLASSIC"), "tas"),
           (write_series(directory / "nc3_64bit.nc", "NETCDF3_64BIT_OFFSET"), "tas"),
           (write_series(directory / "nc4.nc", "NETCDF4"), "tas")]
    for src, var in ((EOFS_SST, "sst"), (IRIS_ROTATED, "air_pressure_at_sea_level")):
        if src.is_file():
            dst = directory / src.name
            dst.write_bytes(src.read_bytes())
            out.append((dst, var))
    return out


def _text_spans(data: bytes, limit: int) -> list[tuple[int, int]]:
    """Runs of 3+ name-like ASCII bytes in the first `limit` bytes (names, attribute text)."""
    return [m.span() for m in re.finditer(rb"[A-Za-z_][A-Za-z0-9_ :.-]{2,}", data[:limit])]


def mutate(data: bytes, rng: random.Random) -> tuple[str, bytes]:
    """One mutant of `data` and what was done to it (``flip``, ``truncate``, ``non-utf8``)."""
    header = min(len(data), 4096)
    kind = rng.choices(["flip", "truncate", "non-utf8"], weights=[5, 2, 3])[0]
    buf = bytearray(data)
    if kind == "truncate":
        cut = rng.randrange(0, header) if rng.random() < 0.6 else rng.randrange(0, len(data))
        return f"truncate@{cut}", bytes(buf[:cut])
    if kind == "non-utf8":
        spans = _text_spans(data, header)
        done = []
        for start, stop in rng.sample(spans, k=min(len(spans), rng.randint(1, 3))):
            at = rng.randrange(start, stop)
            bad = rng.choice(NON_UTF8)[: stop - at]
            buf[at:at + len(bad)] = bad  # same length: the structure stays intact
            done.append(at)
        return f"non-utf8@{','.join(map(str, done))}", bytes(buf)
    done = []
    for _ in range(rng.randint(1, 6)):
        at = rng.randrange(0, header) if rng.random() < 0.8 else rng.randrange(0, len(data))
        buf[at] ^= 1 << rng.randrange(8)
        done.append(at)
    return f"flip@{','.join(map(str, done))}", bytes(buf)


def mutants(bases: list[tuple[Path, str]], directory: Path, per_base: int,
            seed: int = 25) -> Iterator[tuple[Path, str, str]]:
    """Write `per_base` mutants of each base file; yield ``(path, variable, what)``."""
    rng = random.Random(seed)
    directory.mkdir(parents=True, exist_ok=True)
    for base, variable in bases:
        data = base.read_bytes()
        for i in range(per_base):
            what, out = mutate(data, rng)
            path = directory / f"{base.stem}-{i:03d}.nc"
            path.write_bytes(out)
            yield path, variable, f"{base.name} {what}"


@dataclass
class Outcome:
    """How one check of one file ended."""

    path: str
    what: str
    kind: str  # accepted, error, traceback, hang, crash, noise, unnamed
    stderr: str


def _child(check: Callable[[], object], out_fd: int, err_fd: int) -> None:
    """Run `check` as a job process would and leave with its exit status (never returns)."""
    status = 0
    try:
        # pytest's faulthandler writes a crash's traceback to the suite's own output; a
        # job process has none (the crash is still seen, by its signal)
        faulthandler.disable()
        os.dup2(out_fd, 1)
        os.dup2(err_fd, 2)
        sys.stdout = open(1, "w", closefd=False)  # noqa: SIM115 (fd 1 outlives the child)
        sys.stderr = open(2, "w", closefd=False)  # noqa: SIM115
        import logging
        import warnings

        # As in a fresh interpreter (pytest captures warnings and logging in the parent);
        # log records are marked with their logger's name, so ncreel's own can be told
        # from a library's.
        warnings.resetwarnings()
        warnings.simplefilter("default")
        warnings.showwarning = warnings._showwarning_orig  # type: ignore[attr-defined]
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(name)s: %(levelname)s: %(message)s"))
        logging.getLogger().handlers[:] = [handler]
        logging.getLogger().setLevel(logging.WARNING)
        check()
    except SystemExit as exit_:
        code = exit_.code
        if isinstance(code, str):
            print(code, file=sys.stderr)
            status = 1
        else:
            status = int(code or 0)
    except BaseException:  # what Python itself would print: a traceback
        traceback.print_exc()
        status = 1
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(status)


def run_forked(check: Callable[[], object], timeout: float
               ) -> tuple[str, int | None, str, str]:
    """Run `check` in a forked child; return ``(end, status, stdout, stderr)``.

    `end` is ``exit`` (status is the exit status), ``signal`` (status is the signal) or
    ``hang`` (killed after `timeout` seconds).
    """
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        pid = os.fork()
        if pid == 0:
            _child(check, out.fileno(), err.fileno())
        deadline = time.monotonic() + timeout
        pause = 0.001
        while True:
            done, wait_status = os.waitpid(pid, os.WNOHANG)
            if done:
                break
            if time.monotonic() > deadline:
                os.kill(pid, signal.SIGKILL)
                _, wait_status = os.waitpid(pid, 0)
                break
            time.sleep(pause)
            pause = min(pause * 2, 0.02)
        texts = []
        for fh in (out, err):
            fh.seek(0)
            texts.append(fh.read().decode(errors="replace"))
    if not done:
        return "hang", None, *texts
    if os.WIFSIGNALED(wait_status):
        return "signal", os.WTERMSIG(wait_status), *texts
    return "exit", os.WEXITSTATUS(wait_status), *texts


#: stderr lines that are not noise: ncreel's own notes and warnings, and what ncreel's
#: loggers say (marked ``ncreel.<module>: WARNING:`` by :func:`_child`).
ALLOWED = re.compile(r"ncreel: (note|warning): |ncreel(\.\w+)*: (WARNING|INFO): ")


def classify(path: str, end: str, status: int | None, stderr: str) -> str:
    """The kind of ending of one check (see the module's docstring)."""
    if end == "hang":
        return "hang"
    if end == "signal":
        return "crash"
    if "Traceback (most recent call last)" in stderr:
        return "traceback"
    said = [ln for ln in stderr.splitlines() if ln.strip() and not ALLOWED.match(ln)]
    if status == 0:
        return "accepted" if not said else "noise"
    if len(said) != 1 or not said[0].startswith("ncreel: error: "):
        return "noise"
    return "error" if path in said[0] else "unnamed"


@dataclass
class Summary:
    """Counts of each kind, the failures, and the time taken."""

    counts: Counter = field(default_factory=Counter)
    failures: list[Outcome] = field(default_factory=list)
    seconds: float = 0.0

    def line(self) -> str:
        kinds = ("accepted", "error", "traceback", "hang", "crash", "noise", "unnamed")
        return (f"files={sum(self.counts.values())} "
                + " ".join(f"{k}={self.counts.get(k, 0)}" for k in kinds)
                + f" seconds={self.seconds:.1f}")


def fuzz(files: list[tuple[Path, str, str]], make_check: Callable[[str, str], Callable],
         timeout: float = 10.0) -> Summary:
    """Run ``make_check(path, variable)`` on every file in a forked child."""
    summary = Summary()
    start = time.monotonic()
    for path, variable, what in files:
        end, status, _, stderr = run_forked(make_check(str(path), variable), timeout)
        kind = classify(str(path), end, status, stderr)
        summary.counts[kind] += 1
        if kind not in ("accepted", "error"):
            summary.failures.append(Outcome(str(path), what, kind, stderr))
    summary.seconds = time.monotonic() - start
    return summary


#: Seconds a file may take libnetcdf to open before it is taken for hung, in the fuzzer
#: (the workflow allows :data:`ncreel.input.inputcheck.OPEN_TIMEOUT_S`); below the fuzzer's own
#: timeout, so a hang that ncreel catches ends as its one line.
OPEN_TIMEOUT_S = 3.0


def _short_open_timeout() -> None:
    from ncreel.input import inputcheck

    inputcheck.OPEN_TIMEOUT_S = OPEN_TIMEOUT_S


def parse_time_check(path: str, variable: str) -> Callable[[], None]:
    """What ``workflow/rules/common.smk`` does with the input before any job, in its order:
    paths, stamps, header sizes, time steps, the series opened (a grid mapping against its
    2-D latitude/longitude) and its spec, size, cell columns, cell-model run check and time
    axis; ``NcreelError`` ends as its ``fail()``."""

    def check() -> None:
        _short_open_timeout()
        from ncreel.cells import cells_settings, series_columns
        from ncreel.cells.soil import check_run
        from ncreel.config.configcheck import schema_defaults
        from ncreel.config.settings import SeriesSelection
        from ncreel.core.errors import NcreelError
        from ncreel.input.identity import input_stamps
        from ncreel.input.inputcheck import check_input_sizes, check_time_steps
        from ncreel.input.source import resolve_paths
        from ncreel.region.selection import open_selection
        from ncreel.run.resources import check_series_size

        try:
            inputs = resolve_paths(path)
            input_stamps(inputs)
            check_input_sizes(inputs)
            check_time_steps(inputs, variable, None)
            with open_selection(SeriesSelection(
                    paths=inputs, variable=variable, time_dim=None, select={}, lat=None,
                    lon=None, time=None)) as series:
                series.check_one_geometry()
                series.spec()
                check_series_size(n_time=series.n_time, ny=series.ny, nx=series.nx,
                                  variable=series.variable, mem_cap_mb=None)
                cells = cells_settings(schema_defaults("properties", "cells"))
                series_columns(series, cells)
                check_run(series, cells)
                series.time_axis()
        except NcreelError as err:
            sys.exit(f"ncreel: error: {err}")

    return check


def inspect_check(path: str, variable: str) -> Callable[[], None]:
    """``ncreel inspect PATH VARIABLE --no-preview`` (the command's own ``main``)."""

    def check() -> None:
        _short_open_timeout()
        from ncreel.cli import main

        sys.exit(main(["inspect", path, variable, "--no-preview"]))

    return check


def warm_up(path: str, variable: str) -> None:
    """Import and initialise in the parent what every child uses (xarray's backends)."""
    import xarray as xr
    from ncreel import cells, cli  # noqa: F401
    from ncreel.cells import soil  # noqa: F401
    from ncreel.config import settings  # noqa: F401
    from ncreel.input import identity, inputcheck, source  # noqa: F401
    from ncreel.jobs import preflight  # noqa: F401

    with xr.open_dataset(path, decode_times=False) as ds:
        ds.load()
