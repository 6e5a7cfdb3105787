"""One shard's frames into an H.264 segment (``ncreel.render.segment``), with worker processes."""

from __future__ import annotations

import numpy as np
import pytest
from ncreel.render.segment import png_sample, render_shard
from ncreel.run.shardplan import Shard, frame_name
from render_data import decode, ffprobe, needs_ffprobe, spec, write_noisy_nc


@pytest.fixture(scope="module")
def noisy_nc(tmp_path_factory):
    return write_noisy_nc(tmp_path_factory.mktemp("nc") / "noisy.nc")


def test_png_sample_includes_ends_middle_every_and_extra():
    assert png_sample(0, 10) == [0, 4, 9]
    assert png_sample(10, 20, every=4) == [10, 12, 14, 16, 19]
    assert png_sample(10, 20, extra=[3, 15, 25]) == [10, 14, 15, 19]
    assert png_sample(5, 6) == [5]
    assert png_sample(5, 5) == []

@needs_ffprobe
def test_worker_processes_match_single_process(noisy_nc, tmp_path):
    shard = Shard(0, 1, 11)  # 10 frames, not starting at 0
    outs = {}
    for workers in (1, 3):
        frames = tmp_path / f"frames{workers}"
        frames.mkdir()
        seg = tmp_path / f"seg{workers}.mp4"
        info = render_shard(spec(noisy_nc), shard, segment=seg, frames_dir=frames,
                            png_times=range(1, 11), workers=workers)
        assert info["frames"] == 10 and info["workers"] == workers
        assert int(ffprobe(seg)["nb_read_frames"]) == 10
        assert not seg.with_name(seg.name + ".parts").exists()
        outs[workers] = (frames, decode(seg))
    # Every frame's pixels are identical whichever process drew it ...
    for t in range(1, 11):
        a = (outs[1][0] / frame_name(t)).read_bytes()
        b = (outs[3][0] / frame_name(t)).read_bytes()
        assert a == b, f"PNG of step {t} differs"
    # ... and the movies show them in the same order (encoding is lossy, so compare each
    # decoded frame with every frame of the other movie: the closest must be the same index).
    one, three = outs[1][1], outs[3][1]
    dist = np.abs(one[:, None] - three[None]).mean(axis=(2, 3, 4))
    assert list(dist.argmin(axis=1)) == list(range(10))


def test_worker_ranges_end_where_time_chunks_end(tmp_path):
    """render_processes' parts of a shard: a boundary near a chunk's start moves there
    (a day chunk is then decompressed by one worker), balance kept otherwise."""
    from ncreel.input.source import open_series
    from ncreel.run.shardplan import worker_ranges
    from test_input_chunks import write_chunked

    shard = Shard(0, 10, 110)
    days = list(range(24, 110, 24))
    assert worker_ranges(shard, 2) == [(10, 60), (60, 110)]
    assert worker_ranges(shard, 2, days) == [(10, 48), (48, 110)]
    # 34, 33 and 33 frames: 44 and 77 are within 8 of 48 and 72, so they move there
    assert worker_ranges(shard, 3, days) == [(10, 48), (48, 72), (72, 110)]
    assert worker_ranges(shard, 4, [55]) == [(10, 35), (35, 55), (55, 85), (85, 110)]
    assert worker_ranges(shard, 1, days) == [(10, 110)]
    # a file read a step at a time: every step starts a "chunk"; nothing moves
    assert worker_ranges(shard, 3, range(11, 110)) == worker_ranges(shard, 3)
    with open_series(str(write_chunked(tmp_path / "d.nc", 22)), "tas") as s:
        assert worker_ranges(Shard(0, 1, 21), 2, s.chunk_starts(1, 21)) == [(1, 12), (12, 21)]
