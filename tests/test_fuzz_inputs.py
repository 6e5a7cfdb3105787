"""Byte-mutated NetCDF-3 and NetCDF-4 inputs: accepted, or one ``ncreel: error:`` line
naming the file — never a traceback, a crash or a hang (see tests/fuzz_inputs.py)."""

from __future__ import annotations

import collections
import ctypes
import json
import os
import subprocess
import sys
import time
import types
from pathlib import Path

import fuzz_inputs as fz
import pytest
from ncreel.core.errors import NcreelError
from ncreel.input.inputcheck import check_input_sizes, check_opens

#: Failures of every kind the fuzzer tells apart, all of which must stay at 0.
FAILURES = ("traceback", "hang", "crash", "noise", "unnamed")


@pytest.fixture(scope="module")
def bases(tmp_path_factory):
    found = fz.base_files(tmp_path_factory.mktemp("bases"))
    fz.warm_up(str(found[0][0]), found[0][1])
    return found


def _fuzz(bases, directory: Path, per_base: int, seed: int, make_check) -> fz.Summary:
    files = list(fz.mutants(bases, directory, per_base, seed=seed))
    # A file that makes libnetcdf loop is caught by ncreel after OPEN_TIMEOUT_S (3 s here);
    # 30 s for the whole check leaves a loaded machine room before counting a hang.
    summary = fz.fuzz(files, make_check, timeout=30.0)
    print(f"\nfuzz {make_check.__name__} seed={seed}: {summary.line()}")
    for f in summary.failures[:5]:
        print(f"--- {f.kind}: {f.what}\n{f.stderr[-2000:]}")
    return summary


def _assert_clean(summary: fz.Summary, n_files: int) -> None:
    assert sum(summary.counts.values()) == n_files
    assert {k: summary.counts[k] for k in FAILURES} == dict.fromkeys(FAILURES, 0), \
        summary.line()
    # Both endings happen, so the check is exercised both ways.
    assert summary.counts["accepted"] > 0 and summary.counts["error"] > 0, summary.line()


def test_fuzzed_files_through_the_parse_time_check(bases, tmp_path):
    """Every mutant of the NetCDF-3 and NetCDF-4 bases, through what common.smk runs before
    any job: accepted or one line naming the file; 0 tracebacks, 0 hangs, 0 crashes."""
    assert {p.suffix for p, _ in bases} == {".nc"} and len(bases) >= 3
    summary = _fuzz(bases, tmp_path, 40, 25, fz.parse_time_check)
    _assert_clean(summary, 40 * len(bases))


INSPECT_DRIVER = """
import json, sys
from pathlib import Path
import fuzz_inputs as fz
bases = [(Path(p), v) for p, v in json.loads(sys.argv[1])]
fz.warm_up(str(bases[0][0]), bases[0][1])
files = list(fz.mutants(bases, Path(sys.argv[2]), 20, seed=8))
summary = fz.fuzz(files, fz.inspect_check, timeout=30.0)
for f in summary.failures[:5]:
    print(f"--- {f.kind}: {f.what}\\n{f.stderr[-2000:]}", file=sys.stderr)
print(json.dumps({"counts": dict(summary.counts), "line": summary.line()}))
"""


def test_fuzzed_files_through_ncreel_inspect(bases, tmp_path):
    """The same through ``ncreel inspect FILE VARIABLE`` (another seed), forked from a fresh
    interpreter: in the whole suite, children forked from the test process itself (which
    earlier tests leave holding open files, caches and threads) hung on every file that
    inspect accepts, while the same files pass from a clean process."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    proc = subprocess.run([sys.executable, "-c", INSPECT_DRIVER,
                           json.dumps([(str(p), v) for p, v in bases]), str(tmp_path)],
                          capture_output=True, text=True, env=env, timeout=1200)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout.splitlines()[-1])
    print(f"\nfuzz inspect_check seed=8: {result['line']}\n{proc.stderr[-3000:]}")
    summary = types.SimpleNamespace(counts=collections.Counter(result["counts"]))
    _assert_clean(summary, 20 * len(bases))


def test_the_fuzzer_tells_every_failure_apart(tmp_path):
    """The harness itself: a traceback, a hang, a crash, stray output and an error line not
    naming the file are each seen as such (so the fuzz tests' zeros mean something)."""
    path = str(tmp_path / "x.nc")

    def raises():
        raise UnicodeDecodeError("utf-8", b"\xff", 0, 1, "invalid start byte")

    def hangs():
        time.sleep(30)

    def crashes():
        ctypes.string_at(0)

    def noisy():
        print("HDF5-DIAG: Error detected", file=__import__("sys").stderr)
        raise SystemExit(f"ncreel: error: input '{path}': bad")

    def unnamed():
        raise SystemExit("ncreel: error: something is wrong")

    def named():
        raise SystemExit(f"ncreel: error: input '{path}': bad")

    def fine():
        print("report line on stdout")

    seen = {}
    for check in (raises, hangs, crashes, noisy, unnamed, named, fine):
        end, status, _, stderr = fz.run_forked(check, timeout=1.0)
        seen[check.__name__] = fz.classify(path, end, status, stderr)
    assert seen == {"raises": "traceback", "hangs": "hang", "crashes": "crash",
                    "noisy": "noise", "unnamed": "unnamed", "named": "error",
                    "fine": "accepted"}


def _renamed(path: Path, old: bytes, new: bytes) -> Path:
    data = path.read_bytes()
    assert data.count(old) == 1
    out = path.with_name("bad-" + path.name)
    out.write_bytes(data.replace(old, new))
    return out


@pytest.mark.parametrize("fmt", ["NETCDF3_CLASSIC", "NETCDF3_64BIT_OFFSET"])
def test_netcdf3_name_that_is_not_utf8_is_one_line_naming_it(tmp_path, fmt):
    """libnetcdf hands non-UTF-8 names through; netCDF4-python's strict decoding raised
    UnicodeDecodeError. The line names the file, whose name it is and the byte."""
    base = fz.write_series(tmp_path / "base.nc", fmt)
    bad = _renamed(base, b"long_name", b"long\xffname")
    with pytest.raises(NcreelError) as err:
        check_input_sizes([str(bad)])
    text = str(err.value)
    assert text.startswith(f"input '{bad}': the name of an attribute of variable 'tas'")
    assert "'long\ufffdname', has byte 0xff at position 4" in text and "not UTF-8" in text
    # ncreel inspect opens with the reader, without the size check first in its path.
    from ncreel.input.source import open_series

    with pytest.raises(NcreelError) as err:
        open_series(str(bad), "tas")
    assert str(err.value) == text


def test_netcdf4_file_libnetcdf_hangs_on_is_one_line(tmp_path):
    """A real NetCDF-4 file with one byte changed (found by the fuzzer): libnetcdf loops
    for ever in nc_open; the check kills its child and names the file."""
    if not fz.IRIS_ROTATED.is_file():
        pytest.skip("iris-sample-data is not installed")
    data = bytearray(fz.IRIS_ROTATED.read_bytes())
    assert data[2288] == 0x08
    data[2288] = 0x0A
    path = tmp_path / "hangs.nc"
    path.write_bytes(bytes(data))
    start = time.monotonic()
    with pytest.raises(NcreelError, match=f"input '{path}': libnetcdf did not finish opening "
                       "it within 2 s"):
        check_opens([str(path)], 2.0)
    assert time.monotonic() - start < 10


def test_netcdf3_file_libnetcdf_crashes_on_is_one_line(tmp_path):
    """A dimension count of 0x40000003 (one flipped bit, found by the fuzzer) makes
    libnetcdf crash: the header check says so first, and the open check names the crash."""
    base = fz.write_series(tmp_path / "base.nc", "NETCDF3_64BIT_OFFSET")
    data = bytearray(base.read_bytes())
    assert data[8:16] == b"\x00\x00\x00\x0a\x00\x00\x00\x03"  # NC_DIMENSION, 3 dimensions
    data[12] = 0x40
    path = tmp_path / "crashes.nc"
    path.write_bytes(bytes(data))
    with pytest.raises(NcreelError, match="NetCDF-3 header is truncated or malformed"):
        check_input_sizes([str(path)])
    good = fz.write_series(tmp_path / "good.nc", "NETCDF3_CLASSIC")
    with pytest.raises(NcreelError, match=f"input '{path}': libnetcdf crashed \\(SIGSEGV\\) "
                       "opening it: the file is corrupt"):
        check_opens([str(good), str(path)])
    check_opens([str(good)])  # a good file alone passes
    assert os.path.exists(good)
