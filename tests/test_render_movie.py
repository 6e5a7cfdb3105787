"""ffmpeg encoding with the real ffmpeg; ffprobe checks the stream."""

import json
import subprocess

import numpy as np
import pytest
from ncreel.errors import NcreelError
from ncreel.render.frame import FrameRenderer
from ncreel.render.movie import SegmentEncoder, concat_segments, encode_movie
from render_data import H, W, ffprobe, fields, needs_ffprobe, renderer


def probe(path):
    out = subprocess.run(["ffprobe", "-v", "error", "-count_frames", "-select_streams", "v:0",
                          "-show_entries", "stream=codec_name,pix_fmt,width,height,"
                          "nb_read_frames", "-of", "json", str(path)],
                         check=True, capture_output=True, text=True).stdout
    return json.loads(out)["streams"][0]


@pytest.fixture
def frames(tmp_path):
    # Odd width on purpose: the pad filter must make it even for yuv420p.
    r = FrameRenderer(shape=(4, 5), width=161, height=120, dpi=50, cmap="viridis", vmin=0,
                      vmax=1)
    paths = []
    for i in range(7):
        p = tmp_path / f"f{i}.png"
        r.render(np.full((4, 5), i / 6.0), f"t={i}", p)
        paths.append(p)
    return paths


def test_encode(frames, tmp_path):
    out = tmp_path / "m.mp4"
    encode_movie(frames, out, fps=5, crf=23, preset="ultrafast")
    info = probe(out)
    assert info["codec_name"] == "h264" and info["pix_fmt"] == "yuv420p"
    assert (info["width"], info["height"]) == (162, 120)
    assert int(info["nb_read_frames"]) == 7
    # +faststart: the moov atom precedes mdat
    head = out.read_bytes()
    assert head.index(b"moov") < head.index(b"mdat")


def test_missing_frame_fails_loudly_and_leaves_no_movie(frames, tmp_path):
    frames[3].unlink()
    out = tmp_path / "m.mp4"
    with pytest.raises(NcreelError, match=r"1 of 7 frames missing, first: .*f3.png"):
        encode_movie(frames, out)
    assert not out.exists()


def test_ffmpeg_error_is_reported(tmp_path):
    bad = tmp_path / "bad.png"
    bad.write_bytes(b"not a png")
    out = tmp_path / "m.mp4"
    with pytest.raises(NcreelError, match="ffmpeg failed"):
        encode_movie([bad], out)
    assert not out.exists() and not (tmp_path / "m.mp4.part").exists()


@needs_ffprobe
def test_segments_concat_to_right_frame_count(tmp_path):
    shape = (6, 8)
    data = fields(13, shape)
    r = renderer(shape, blit=True)
    segments = []
    for k, (a, b) in enumerate([(0, 5), (5, 6), (6, 13)]):
        seg = tmp_path / f"seg{k}.mp4"
        with SegmentEncoder(seg, width=W, height=H, fps=12, crf=18, preset="ultrafast") as enc:
            for i in range(a, b):
                enc.write(r.draw(data[i], str(i)))
        assert enc.n_frames == b - a
        assert not seg.with_name(seg.name + ".part").exists()
        segments.append(seg)
    movie = tmp_path / "movie.mp4"
    concat_segments(segments, movie)
    info = ffprobe(movie)
    assert int(info["nb_read_frames"]) == 13
    assert (info["codec_name"], info["pix_fmt"]) == ("h264", "yuv420p")
    assert (info["width"], info["height"]) == (W, H)


def test_concat_fails_loudly_on_missing_segment(tmp_path):
    (tmp_path / "a.mp4").write_bytes(b"x")
    with pytest.raises(NcreelError, match="1 of 2 segments missing"):
        concat_segments([tmp_path / "a.mp4", tmp_path / "b.mp4"], tmp_path / "m.mp4")
    assert not (tmp_path / "m.mp4").exists()


def test_segment_encoder_leaves_no_file_on_error(tmp_path):
    seg = tmp_path / "seg.mp4"
    with pytest.raises(RuntimeError), SegmentEncoder(seg, width=W, height=H, fps=12, crf=18,
                                                     preset="ultrafast") as enc:
        enc.write(np.zeros((H, W, 4), np.uint8))
        raise RuntimeError("killed mid-shard")
    assert not seg.exists() and not seg.with_name("seg.mp4.part").exists()


def test_segment_encoder_rejects_wrong_frame_size(tmp_path):
    with pytest.raises(ValueError, match="expected"), SegmentEncoder(
            tmp_path / "s.mp4", width=W, height=H, fps=12, crf=18, preset="ultrafast") as enc:
        enc.write(np.zeros((H + 1, W, 4), np.uint8))
