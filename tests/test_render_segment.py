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
