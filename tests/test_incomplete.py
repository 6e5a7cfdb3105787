"""ncreel.run.incomplete reads the incomplete marks Snakemake itself writes."""

from __future__ import annotations

from pathlib import Path

from ncreel.run.incomplete import interrupted_outputs, marked_incomplete, marker_path
from snakemake.persistence.file import FilePersistence


def test_marks_written_by_snakemake_are_read_back(tmp_path, monkeypatch):
    """Snakemake's FilePersistence marks outputs incomplete (a path longer than NAME_MAX
    split into @-directories); every mark is read back, and only the present outputs
    under the run's directory count as left by an interrupted job."""
    monkeypatch.chdir(tmp_path)
    persistence = FilePersistence(nolock=True, path=Path(".snakemake"))
    long_dir = "results/demo/" + "/".join(["d" * 100] * 3)  # a mark longer than NAME_MAX
    paths = ["results/demo/cells/00000.copy", "results/demo/frames/00000",
             f"{long_dir}/b.mp4", "results/demo/segments/00001.mp4",
             "results/other/cells/00000.copy"]
    for p in paths:
        persistence._mark_incomplete(p, None)
    assert marked_incomplete(tmp_path) == sorted(paths)
    assert all(marker_path(tmp_path, p).exists() for p in paths)
    for p in paths[0], f"{long_dir}/b.mp4", "results/other/cells/00000.copy":
        Path(p).parent.mkdir(parents=True, exist_ok=True)
        Path(p).write_text("x")
    Path("results/demo/frames/00000").mkdir(parents=True)  # a directory output
    # 00001.mp4 was never written: the job will run anyway.
    assert interrupted_outputs("results/demo", tmp_path) == sorted(
        [paths[0], paths[1], f"{long_dir}/b.mp4"])
    persistence._unmark_incomplete(paths[0])
    assert paths[0] not in interrupted_outputs("results/demo/", tmp_path)
    assert interrupted_outputs("results/demo", tmp_path / "nowhere") == []
