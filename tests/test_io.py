"""``ncreel.core.io.atomic_path``: an output appears under its final name only when complete."""

import pytest
from ncreel.core.io import atomic_path


def test_file_appears_only_on_success(tmp_path):
    final = tmp_path / "sub" / "out.txt"
    with atomic_path(final) as tmp:
        assert tmp == final.with_name("out.txt.part")
        tmp.write_text("whole")
        assert not final.exists()
    assert final.read_text() == "whole"
    assert not tmp.exists()


def test_failure_leaves_nothing_new_and_keeps_the_old_output(tmp_path):
    final = tmp_path / "out.txt"
    final.write_text("from the last run")
    with pytest.raises(KeyboardInterrupt), atomic_path(final) as tmp:
        tmp.write_text("half")
        raise KeyboardInterrupt  # a BaseException, like the job being stopped
    assert final.read_text() == "from the last run"
    assert not tmp.exists()


def test_stale_part_of_a_killed_run_is_removed_first(tmp_path):
    final = tmp_path / "frames"
    stale = tmp_path / "frames.part"
    stale.mkdir()
    (stale / "frame_000007.png").write_bytes(b"old")
    with atomic_path(final) as tmp:
        assert not tmp.exists()
        tmp.mkdir()
        (tmp / "frame_000001.png").write_bytes(b"new")
    assert sorted(p.name for p in final.iterdir()) == ["frame_000001.png"]


def test_directory_replaces_the_empty_one_snakemake_made(tmp_path):
    final = tmp_path / "frames"
    final.mkdir()  # Snakemake creates directory() outputs before the job runs
    with atomic_path(final) as tmp:
        tmp.mkdir()
        (tmp / "a.png").write_bytes(b"x")
    assert [p.name for p in final.iterdir()] == ["a.png"]


def test_report_writers_write_through_atomic_path(tmp_path):
    # A job killed mid-write left a half-written report file under its final name
    # (Snakemake does not redo jobs after a checkpoint whose incomplete marker remains).
    import re
    from pathlib import Path

    from ncreel.report.resourcepage import COLUMNS, write_csv

    class Boom:
        def __str__(self):
            raise RuntimeError("killed")

    with pytest.raises(RuntimeError):
        write_csv([dict.fromkeys(COLUMNS, 1), dict.fromkeys(COLUMNS, Boom())],
                  tmp_path / "r.csv")
    assert not list(tmp_path.iterdir())
    root = Path(__file__).resolve().parents[1] / "workflow"
    direct = re.compile(r"savefig\(path|Path\(path\)\.write_text|open\(path, \"w|"
                        r"copyfile\([^)]*snakemake\.output")
    for f in [*sorted((root / "ncreel" / "report").glob("*.py")),
              root / "scripts" / "preview.py"]:
        assert not direct.search(f.read_text()), f
