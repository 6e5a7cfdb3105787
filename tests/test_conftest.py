"""The test suite's own plumbing: a failing external program shows its own message."""

from conftest import ROOT

pytest_plugins = ["pytester"]


def test_failed_program_output_is_in_the_report(pytester):
    pytester.makeconftest((ROOT / "tests" / "conftest.py").read_text())
    pytester.makepyfile(test_fail="""
import subprocess, sys

def test_psql_like_failure():
    subprocess.run([sys.executable, "-c",
                    "import sys; sys.stderr.write('zstd: not found\\\\n'); sys.exit(3)"],
                   check=True, capture_output=True)
""")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(failed=1)
    text = result.stdout.str()
    assert "failed program" in text and "zstd: not found" in text and "exit status 3" in text


def test_missing_system_program_skips_with_reason_but_a_failing_one_fails(pytester):
    # A program that is not installed skips the test (a user without root cannot install
    # it); the same FileNotFoundError for a program that IS on PATH still fails.
    pytester.makeconftest((ROOT / "tests" / "conftest.py").read_text())
    pytester.makepyfile(test_missing="""
import os, subprocess

def test_needs_zstd(monkeypatch):
    monkeypatch.setenv("PATH", os.path.dirname(os.__file__))  # nothing of /usr/bin
    subprocess.run(["zstd", "-V"], check=True)

def test_present_program_raising(monkeypatch, tmp_path):
    (tmp_path / "psql").write_text("#!/bin/sh\\n")
    (tmp_path / "psql").chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))  # psql is installed here
    raise FileNotFoundError(2, "No such file or directory", "psql")
""")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-ra")
    text = result.stdout.str()
    result.assert_outcomes(skipped=1, failed=1)
    assert "needs zstd (Debian package zstd), not installed: as root `make sysdeps`" in text


def test_a_tests_chdir_into_its_removed_tmp_path_does_not_reach_the_next_test(pytester):
    pytester.makeconftest((ROOT / "tests" / "conftest.py").read_text())
    pytester.makepyfile(test_cwd="""
import os

def test_a(tmp_path):
    os.chdir(tmp_path)

def test_b():
    assert "test_a0" not in os.getcwd()
""")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider",
                                           "-o", "tmp_path_retention_policy=failed")
    result.assert_outcomes(passed=2)
