"""Encode an ordered list of PNG frames into an H.264 MP4 with ffmpeg."""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import tempfile
from collections.abc import Sequence

from ncreel.errors import NcreelError
from ncreel.io import atomic_path

log = logging.getLogger(__name__)


def ffmpeg_executable() -> str:
    """Path of ffmpeg: the one on ``PATH``, else the binary shipped by imageio-ffmpeg.

    Raises
    ------
    NcreelError
        If neither exists.
    """
    found = shutil.which("ffmpeg")
    if found:
        return found
    try:
        import imageio_ffmpeg
    except ImportError as err:
        raise NcreelError("ffmpeg not found on PATH and imageio-ffmpeg is not installed") from err
    return imageio_ffmpeg.get_ffmpeg_exe()


def ffmpeg_args(ffmpeg: str, output: str, *, fps: float, crf: int,
                preset: str = "medium") -> list[str]:
    """Ffmpeg argument list reading PNGs from stdin and writing H.264/yuv420p MP4.

    The ``pad`` filter rounds width and height up to even numbers, which yuv420p's 2x2
    chroma subsampling requires; ``+faststart`` moves the index to the front so players
    and browsers can start before the whole file has arrived.
    """
    return [ffmpeg, "-hide_banner", "-loglevel", "error", "-nostdin", "-y",
            "-f", "image2pipe", "-framerate", f"{fps:g}", "-c:v", "png", "-i", "pipe:0",
            "-vf", "pad=ceil(iw/2)*2:ceil(ih/2)*2",
            "-c:v", "libx264", "-preset", preset, "-crf", str(int(crf)),
            "-pix_fmt", "yuv420p", "-movflags", "+faststart", "-f", "mp4", output]


def encode_movie(frames: Sequence[str | os.PathLike], output: str | os.PathLike, *,
                 fps: float = 10, crf: int = 18, preset: str = "medium",
                 ffmpeg: str | None = None) -> None:
    """Encode `frames`, in the given order, into `output`.

    Parameters
    ----------
    frames : sequence of path
        PNG files, one per time step, in time order. All must exist.
    output : path
        MP4 file; written under a temporary name and renamed when ffmpeg succeeds.
    fps : float
        Frames per second of the movie.
    crf : int
        libx264 constant rate factor (0-51; lower is better quality, 18 ≈ visually lossless).
    preset : str
        libx264 speed/size preset.
    ffmpeg : str, optional
        ffmpeg executable; see :func:`ffmpeg_executable`.

    Raises
    ------
    NcreelError
        If there are no frames, any frame is missing (the first missing ones are named),
        or ffmpeg fails (its error output is included).
    """
    frames = [os.fspath(f) for f in frames]
    if not frames:
        raise NcreelError("encode_movie: no frames to encode")
    missing = [f for f in frames if not os.path.isfile(f)]
    if missing:
        raise NcreelError(f"encode_movie: {len(missing)} of {len(frames)} frames missing, "
                          f"first: {', '.join(missing[:3])}")
    exe = ffmpeg or ffmpeg_executable()
    with atomic_path(output) as tmp:
        args = ffmpeg_args(exe, os.fspath(tmp), fps=fps, crf=crf, preset=preset)
        log.info("running %s", " ".join(args))
        # stderr goes to a temp file, not a pipe: a chatty ffmpeg can never block on it.
        with tempfile.TemporaryFile() as errf, subprocess.Popen(
                args, stdin=subprocess.PIPE, stderr=errf) as proc:
            try:
                for frame in frames:
                    with open(frame, "rb") as fh:
                        proc.stdin.write(fh.read())
                proc.stdin.close()
            except BrokenPipeError:
                pass  # ffmpeg exited early; its stderr below says why
            proc.wait()
            errf.seek(0)
            err = errf.read().decode(errors="replace")
        if proc.returncode != 0:
            raise NcreelError(f"ffmpeg failed (exit {proc.returncode}) writing {output}: "
                              f"{err.strip()[-2000:]}")
