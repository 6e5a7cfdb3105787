"""ffmpeg encoding with the real ffmpeg; ffprobe checks the stream."""

import json
import shutil
import subprocess

import numpy as np
import pytest
from conftest import needs_programs
from ncreel.core.errors import NcreelError
from ncreel.render.frame import FrameRenderer
from ncreel.render.movie import (
    SegmentEncoder,
    concat_segments,
    encode_movie,
    ffmpeg_executable,
)
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


@needs_programs("ffmpeg")
def test_the_ffmpeg_on_path_comes_before_imageio_ffmpegs(tmp_path):
    """A site's ffmpeg (Debian's package, a cluster's module) is the one a job runs, not
    the binary imageio-ffmpeg ships; a segment encodes with it. Cheap on purpose: CI's
    fresh root runs it as an ordinary user once ffmpeg is installed (.ci/fresh-root.sh)."""
    assert ffmpeg_executable() == shutil.which("ffmpeg")
    out = tmp_path / "s.mp4"
    with SegmentEncoder(out, width=64, height=48, fps=5, crf=23, preset="ultrafast",
                        threads=1) as encoder:
        for i in range(3):
            encoder.write(np.full((48, 64, 4), 60 * i, np.uint8))
    assert out.stat().st_size > 0


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


@needs_ffprobe
def test_transcode_webm_and_gif_from_the_movie(frames, tmp_path):
    from ncreel.render.movie import transcode_movie

    movie = tmp_path / "movie.mp4"
    encode_movie(frames, movie, fps=7, crf=23)
    transcode_movie(movie, tmp_path / "movie.webm", "webm", crf=40)
    webm = probe(tmp_path / "movie.webm")
    assert webm["codec_name"] == "vp9" and webm["pix_fmt"] == "yuv420p"
    assert int(webm["nb_read_frames"]) == 7 and webm["width"] == 162
    transcode_movie(movie, tmp_path / "movie.gif", "gif", width=80, fps=7)
    gif = probe(tmp_path / "movie.gif")
    assert gif["codec_name"] == "gif" and gif["width"] == 80 and int(gif["nb_read_frames"]) == 7
    # Never scaled up: asked for 480, a GIF of this 162-pixel movie keeps its width.
    transcode_movie(movie, tmp_path / "wide.gif", "gif", width=480, fps=7)
    assert probe(tmp_path / "wide.gif")["width"] == 162
    # The GIF's colours are the frames' own (one palette for all): its first and last frames
    # differ as the field's colours do.
    out = subprocess.run(["ffmpeg", "-v", "error", "-i", str(tmp_path / "movie.gif"), "-f",
                          "rawvideo", "-pix_fmt", "rgb24", "-"], capture_output=True,
                         check=True).stdout
    pix = np.frombuffer(out, np.uint8).reshape(7, -1, 80, 3)
    assert np.abs(pix[0].astype(int) - pix[-1].astype(int)).mean() > 10


@needs_ffprobe
@pytest.mark.parametrize("movie_fps", [2, 24])
def test_gif_and_webm_of_a_one_frame_movie(frames, tmp_path, movie_fps):
    """A one-frame movie shorter than a GIF frame (1/24 s against 1/10 s) still makes a
    one-frame GIF: ffmpeg's fps filter would drop its only frame at the end of the input
    (eof_action=round), leaving no palette and an ffmpeg error."""
    from ncreel.render.movie import transcode_movie

    movie = tmp_path / "one.mp4"
    encode_movie(frames[:1], movie, fps=movie_fps, crf=23)
    transcode_movie(movie, tmp_path / "one.gif", "gif", width=80, fps=10)
    gif = probe(tmp_path / "one.gif")
    # At 2 frames/s the movie lasts half a second: 5 GIF frames at 10/s.
    assert gif["width"] == 80 and int(gif["nb_read_frames"]) == (5 if movie_fps == 2 else 1)
    transcode_movie(movie, tmp_path / "one.webm", "webm", crf=40)
    assert int(probe(tmp_path / "one.webm")["nb_read_frames"]) == 1


def test_transcode_of_a_missing_movie_or_unknown_format(tmp_path):
    from ncreel.render.movie import transcode_args, transcode_movie

    with pytest.raises(NcreelError, match="not found: run the workflow"):
        transcode_movie(tmp_path / "none.mp4", tmp_path / "x.webm", "webm")
    assert not (tmp_path / "x.webm").exists()
    with pytest.raises(ValueError, match="use one of webm, gif"):
        transcode_args("ffmpeg", "a.mp4", "a.avi", "avi")
