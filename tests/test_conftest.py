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
