"""H.264 encoding with ffmpeg: raw frames into per-shard segments, segments into the movie.

Each render job pipes its frames' raw RGBA pixels into one ffmpeg process, which writes
the shard's segment (:class:`SegmentEncoder`); the movie rule joins the segments with the
concat demuxer and ``-c copy`` (:func:`concat_segments`), so no frame is encoded twice and
no PNG has to be written, compressed, read and decompressed on the way. Every segment is
encoded with the same settings (libx264, crf, preset, yuv420p, even size, fps), which is
what lets the concat demuxer join them without re-encoding. :func:`encode_movie` (PNG
frames into one MP4) is kept for frames coming from elsewhere.
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from ncreel.core.errors import DiskFull, NcreelError, ProgramKilled
from ncreel.core.io import atomic_path

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


def ffmpeg_error(returncode: int, doing: str, stderr: str) -> NcreelError:
    """Return the error for an ffmpeg that failed `doing` something (its status, stderr).

    A negative `returncode` (killed by a signal) gives a
    :class:`ncreel.core.errors.ProgramKilled`, so a memory kill of ffmpeg is retried with more
    memory and an interruption is not; a full disk gives :class:`ncreel.core.errors.DiskFull`
    (not retried with more memory either).
    """
    text = stderr.strip()[-2000:]
    if returncode < 0:
        import signal

        name = signal.Signals(-returncode).name
        return ProgramKilled(f"ffmpeg was killed by {name} {doing}"
                             + (" (out of memory?)" if name == "SIGKILL" else "")
                             + (f": {text}" if text else ""), -returncode)
    for full in ("No space left on device", "Disk quota exceeded"):
        if full in text:
            return DiskFull(f"ffmpeg could not finish {doing}: {full.lower()} (the disk is "
                            "full): free space there, then run the same command again")
    return NcreelError(f"ffmpeg failed (exit {returncode}) {doing}: {text}")


def ffmpeg_args(ffmpeg: str, output: str, *, fps: float, crf: int,
                preset: str = "medium") -> list[str]:
    """Return the ffmpeg arguments reading PNGs from stdin and writing H.264/yuv420p MP4.

    The ``pad`` filter rounds width and height up to even numbers, which yuv420p's 2x2
    chroma subsampling requires; ``+faststart`` moves the index to the front so players
    and browsers can start before the whole file has arrived.
    """
    return [ffmpeg, "-hide_banner", "-loglevel", "error", "-nostdin", "-y",
            "-f", "image2pipe", "-framerate", f"{fps:g}", "-c:v", "png", "-i", "pipe:0",
            *x264_args(crf=crf, preset=preset), "-movflags", "+faststart", "-f", "mp4", output]


def x264_args(*, crf: int, preset: str) -> list[str]:
    """Output options shared by every encode: even size, libx264, crf, preset, yuv420p.

    The ``pad`` filter rounds width and height up to even numbers, which yuv420p's 2x2
    chroma subsampling requires.
    """
    return ["-vf", "pad=ceil(iw/2)*2:ceil(ih/2)*2",
            "-c:v", "libx264", "-preset", preset, "-crf", str(int(crf)), "-pix_fmt", "yuv420p"]


def segment_args(ffmpeg: str, output: str, *, width: int, height: int, fps: float, crf: int,
                 preset: str = "medium", threads: int | None = None) -> list[str]:
    """Return the ffmpeg arguments reading raw RGBA `width` x `height` frames from stdin.

    The pixels are exactly those ``savefig`` would put in a PNG, and ffmpeg converts them
    to yuv420p with the same filter chain as :func:`ffmpeg_args`, so a segment looks the
    same as the PNG path's movie. `threads` caps the encoder's threads (``-threads``), so
    a job stays within the cores it declared; ``None`` lets libx264 choose.
    """
    args = [ffmpeg, "-hide_banner", "-loglevel", "error", "-nostdin", "-y",
            "-f", "rawvideo", "-pix_fmt", "rgba", "-s", f"{int(width)}x{int(height)}",
            "-framerate", f"{fps:g}", "-i", "pipe:0", *x264_args(crf=crf, preset=preset)]
    if threads:
        args += ["-threads", str(int(threads))]
    return [*args, "-f", "mp4", output]


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
                args, stdin=subprocess.PIPE, stderr=errf, start_new_session=True) as proc:
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
            raise ffmpeg_error(proc.returncode, f"writing {output}", err)


class SegmentEncoder:
    """One ffmpeg process turning raw RGBA frames into an H.264 MP4 segment.

    Use as a context manager; the segment is written as ``<output>.part`` and renamed to
    `output` only when every frame was written and ffmpeg exited cleanly.

    Parameters
    ----------
    output : path
        Segment file (MP4).
    width, height : int
        Frame size in pixels; every frame must be ``(height, width, 4)`` uint8.
    fps : float
        Frames per second.
    crf : int
        libx264 constant rate factor.
    preset : str
        libx264 preset.
    threads : int, optional
        Encoder thread cap (see :func:`segment_args`).
    ffmpeg : str, optional
        ffmpeg executable; see :func:`ffmpeg_executable`.

    Raises
    ------
    NcreelError
        If ffmpeg fails (its error output is included) or no frame was written.
    ValueError
        If a frame has the wrong shape or dtype.
    """

    def __init__(self, output: str | os.PathLike, *, width: int, height: int, fps: float,
                 crf: int, preset: str = "medium", threads: int | None = None,
                 ffmpeg: str | None = None) -> None:
        self.output = Path(output)
        self.shape = (int(height), int(width), 4)
        self._kw = {"width": width, "height": height, "fps": fps, "crf": crf,
                    "preset": preset, "threads": threads}
        self._exe = ffmpeg or ffmpeg_executable()
        self.n_frames = 0
        #: ffmpeg's own peak resident memory (MiB), read once all frames are in (its
        #: look-ahead is full by then); None where /proc cannot tell.
        self.peak_rss_mb = None
        self._atomic = None
        self._proc = None
        self._err = None

    def __enter__(self) -> SegmentEncoder:
        self._atomic = atomic_path(self.output)
        tmp = self._atomic.__enter__()
        args = segment_args(self._exe, os.fspath(tmp), **self._kw)
        log.info("running %s", " ".join(args))
        # stderr to a file, not a pipe: a pipe nobody reads could fill up and stall ffmpeg.
        self._err = tempfile.TemporaryFile()
        # A session of its own: a signal to the job's process group (Ctrl-C) reaches the
        # Python job, which stops ffmpeg itself, instead of killing ffmpeg alone (which
        # would look like a failed encoder and be retried).
        self._proc = subprocess.Popen(args, stdin=subprocess.PIPE, stderr=self._err,
                                      start_new_session=True)
        return self

    def write(self, rgba: np.ndarray) -> None:
        """Append one frame, shape ``(height, width, 4)`` uint8 (e.g. from FrameRenderer.draw)."""
        if rgba.shape != self.shape or rgba.dtype != np.uint8:
            raise ValueError(f"frame {rgba.shape} {rgba.dtype}: expected {self.shape} uint8")
        try:
            # The buffer protocol hands the canvas memory to the pipe without a copy.
            self._proc.stdin.write(memoryview(np.ascontiguousarray(rgba)).cast("B"))
        except BrokenPipeError:
            self._fail()  # ffmpeg exited early; its stderr says why
        self.n_frames += 1

    def _fail(self):
        self._proc.wait()
        self._err.seek(0)
        err = self._err.read().decode(errors="replace").strip()[-2000:]
        raise ffmpeg_error(self._proc.returncode, f"writing {self.output}", err)

    def __exit__(self, exc_type, exc, tb) -> None:
        from ncreel.core.procmem import peak_rss_mb

        self.peak_rss_mb = peak_rss_mb(self._proc.pid)
        try:
            try:
                self._proc.stdin.close()
            except BrokenPipeError:
                pass
            if exc_type is not None:
                self._proc.kill()
                self._proc.wait()
            elif self._proc.wait() != 0:
                self._fail()
            elif self.n_frames == 0:
                raise NcreelError(f"segment {self.output}: no frames written")
        except BaseException as err:
            self._atomic.__exit__(type(err), err, err.__traceback__)
            raise
        finally:
            self._err.close()
        # Renames <output>.part onto output on success, removes it on failure.
        self._atomic.__exit__(exc_type, exc, tb)


def concat_segments(segments: Sequence[str | os.PathLike], output: str | os.PathLike, *,
                    faststart: bool = True, ffmpeg: str | None = None) -> None:
    """Join MP4 segments, in the given order, into `output` without re-encoding.

    Uses ffmpeg's concat demuxer with ``-c copy`` on an explicit ordered list; valid
    because every segment was encoded with the same codec settings, size and fps.

    Parameters
    ----------
    segments : sequence of path
        Segment files in time order. All must exist.
    output : path
        MP4 file; written under a temporary name and renamed when ffmpeg succeeds.
    faststart : bool
        Move the index to the front (``-movflags +faststart``) so playback can start
        before the whole file has arrived; not needed for intermediate joins.
    ffmpeg : str, optional
        ffmpeg executable; see :func:`ffmpeg_executable`.

    Raises
    ------
    NcreelError
        If there are no segments, any is missing or empty (the first ones are named), or
        ffmpeg fails (its error output is included).
    """
    segments = [Path(s).resolve() for s in segments]
    if not segments:
        raise NcreelError("concat_segments: no segments to join")
    missing = [os.fspath(s) for s in segments if not s.is_file() or s.stat().st_size == 0]
    if missing:
        raise NcreelError(f"concat_segments: {len(missing)} of {len(segments)} segments "
                          f"missing or empty, first: {', '.join(missing[:3])}")
    exe = ffmpeg or ffmpeg_executable()
    with atomic_path(output) as tmp, tempfile.TemporaryDirectory() as tdir:
        listing = Path(tdir) / "segments.txt"
        # concat demuxer syntax: single-quoted paths, a quote written as '\''.
        listing.write_text("".join("file '{}'\n".format(os.fspath(s).replace("'", "'\\''"))
                                   for s in segments))
        args = [exe, "-hide_banner", "-loglevel", "error", "-nostdin", "-y",
                "-f", "concat", "-safe", "0", "-i", os.fspath(listing), "-c", "copy",
                *(["-movflags", "+faststart"] if faststart else []), "-f", "mp4",
                os.fspath(tmp)]
        log.info("running %s", " ".join(args))
        proc = subprocess.run(args, capture_output=True, start_new_session=True)
        if proc.returncode != 0:
            raise ffmpeg_error(proc.returncode, f"joining {len(segments)} segments into "
                               f"{output}", proc.stderr.decode(errors="replace"))


#: Movie formats made from the joined MP4 (each by its own rule, :func:`transcode_movie`).
EXTRA_FORMATS = ("webm", "gif")


def transcode_args(ffmpeg: str, movie: str, output: str, fmt: str, *, crf: int = 33,
                   width: int = 480, fps: float = 10.0, threads: int = 1,
                   palette: str | None = None) -> list[str]:
    """Return the ffmpeg arguments making `output` in `fmt` from the joined H.264 `movie`.

    ``webm``: VP9 in constant-quality mode (``-crf`` with ``-b:v 0``), ``-deadline good
    -cpu-used 4 -row-mt 1`` (the speed/quality setting of Google's VP9 on-demand
    guidance), yuv420p. ``gif``: the second of two passes, frames at `fps` scaled to `width`
    (height kept in proportion, even), mapped to the 256-colour `palette` computed over the
    whole movie by the first pass (``palettegen``), so no frame is kept in memory;
    ``-loop 0`` repeats. Passing the palette as a file instead of ffmpeg's ``split``
    filter keeps memory bounded: ``split`` would buffer every frame until the palette is
    known.

    Raises
    ------
    ValueError
        For a format other than :data:`EXTRA_FORMATS`, or a gif without `palette`.
    """
    head = [ffmpeg, "-hide_banner", "-loglevel", "error", "-nostdin", "-y", "-i", movie]
    if fmt == "webm":
        return [*head, "-c:v", "libvpx-vp9", "-crf", str(int(crf)), "-b:v", "0",
                "-deadline", "good", "-cpu-used", "4", "-row-mt", "1",
                "-threads", str(max(int(threads), 1)), "-pix_fmt", "yuv420p", "-an",
                "-f", "webm", output]
    if fmt == "gif":
        if palette is None:
            raise ValueError("a gif needs the palette of its first pass")
        return [*head, "-i", palette, "-lavfi",
                # eof_action=pass: a movie shorter than one GIF frame (one frame at 24/s)
                # keeps its frame; the fps filter's default drops it (an empty GIF).
                f"fps={fps:g}:eof_action=pass,{_gif_scale(width)}[v];"
                "[v][1:v]paletteuse=dither=bayer:bayer_scale=5:diff_mode=rectangle",
                "-loop", "0", "-f", "gif", output]
    raise ValueError(f"movie format {fmt!r}: use one of {', '.join(EXTRA_FORMATS)}")


def preview_movie(movie: str | os.PathLike, output: str | os.PathLike, *,
                  duration_s: float, max_bytes: int, width: int = 480,
                  min_kbps: float = 150.0, ffmpeg: str | None = None) -> float:
    """Write a smaller H.264 copy of `movie` that fits in `max_bytes`, for a web page.

    The copy is scaled to at most `width` pixels wide and encoded at the bitrate that
    fits `max_bytes` over `duration_s` (``-b:v`` with ``-maxrate``/``-bufsize`` so no
    stretch overshoots much). When even `min_kbps` would not fit the whole movie, the copy
    holds only its first ``max_bytes * 8 / min_kbps`` seconds: a preview a person can
    judge beats a blur of the whole run. The encoder overshoots a little, so the bitrate
    is lowered by a quarter and the copy made again until it fits (at most four times).

    Parameters
    ----------
    movie : path
        The joined H.264 MP4.
    output : path
        The copy (MP4, yuv420p, ``+faststart``); written under a temporary name.
    duration_s : float
        Length of `movie` in seconds (frames / fps).
    max_bytes : int
        Largest size of the copy in bytes.
    width : int
        Largest width of the copy in pixels (a smaller movie keeps its own).
    min_kbps : float
        Lowest video bitrate (kbit/s) worth watching at `width`.
    ffmpeg : str, optional
        ffmpeg executable; see :func:`ffmpeg_executable`.

    Returns
    -------
    float
        Seconds of the movie the copy holds (`duration_s` when it holds all of it).

    Raises
    ------
    NcreelError
        If ffmpeg fails, or no copy fits in `max_bytes`.
    """
    exe = ffmpeg or ffmpeg_executable()
    duration_s = max(float(duration_s), 0.1)
    # 5 % for the MP4 container and the encoder's start-up.
    budget_bits = max_bytes * 8 * 0.95
    seconds = min(duration_s, budget_bits / (min_kbps * 1000))
    kbps = budget_bits / seconds / 1000
    for _ in range(4):
        with atomic_path(output) as tmp:
            args = [exe, "-hide_banner", "-loglevel", "error", "-nostdin", "-y",
                    "-i", os.fspath(movie), "-t", f"{seconds:.3f}", "-an",
                    "-vf", f"scale='min({int(width)},iw)':-2:flags=lanczos",
                    "-c:v", "libx264", "-preset", "medium", "-b:v", f"{kbps:.0f}k",
                    "-maxrate", f"{kbps:.0f}k", "-bufsize", f"{2 * kbps:.0f}k",
                    "-pix_fmt", "yuv420p", "-movflags", "+faststart", "-f", "mp4",
                    os.fspath(tmp)]
            log.info("running %s", " ".join(args))
            proc = subprocess.run(args, capture_output=True, start_new_session=True)
            if proc.returncode != 0:
                raise ffmpeg_error(proc.returncode, f"making a preview of {movie}",
                                   proc.stderr.decode(errors="replace"))
            if Path(tmp).stat().st_size <= max_bytes:
                return seconds
        kbps *= 0.75
    Path(output).unlink(missing_ok=True)
    raise NcreelError(f"no preview of {movie} fits in {max_bytes} bytes")


def _gif_scale(width: int) -> str:
    # At most the movie's own width: a GIF is never scaled up (quoted: the comma of min()
    # would end the filter).
    return f"scale='min({int(width)},iw)':-2:flags=lanczos"


def palette_args(ffmpeg: str, movie: str, palette: str, *, width: int = 480,
                 fps: float = 10.0) -> list[str]:
    """Return the ffmpeg arguments of the GIF's first pass: one palette for the whole movie.

    ``stats_mode=diff`` weighs the pixels that change between frames, the moving field
    rather than the static map and text.
    """
    return [ffmpeg, "-hide_banner", "-loglevel", "error", "-nostdin", "-y", "-i", movie,
            "-vf", f"fps={fps:g}:eof_action=pass,{_gif_scale(width)},"
            "palettegen=stats_mode=diff",
            "-frames:v", "1", "-update", "1", palette]


def transcode_movie(movie: str | os.PathLike, output: str | os.PathLike, fmt: str, *,
                    crf: int = 33, width: int = 480, fps: float = 10.0, threads: int = 1,
                    ffmpeg: str | None = None) -> None:
    """Write the run's movie in another format (WebM/VP9 or an animated GIF).

    Parameters
    ----------
    movie : path
        The joined H.264 MP4 (``movie.mp4``).
    output : path
        ``movie.webm`` or ``movie.gif``; written under a temporary name and renamed when
        ffmpeg succeeds, so a killed job leaves no file that looks complete.
    fmt : {"webm", "gif"}
    crf : int
        VP9 constant rate factor (0-63, lower is better; WebM only).
    width : int
        GIF width in pixels (the height follows the movie's aspect ratio).
    fps : float
        GIF frames per second (frames are dropped or repeated to match).
    threads : int
        Encoder threads (WebM).
    ffmpeg : str, optional
        ffmpeg executable; see :func:`ffmpeg_executable`.

    Raises
    ------
    NcreelError
        If `movie` is missing or ffmpeg fails (its error output is included).
    """
    if not Path(movie).is_file():
        raise NcreelError(f"movie '{movie}' not found: run the workflow to make it first")
    exe = ffmpeg or ffmpeg_executable()
    with atomic_path(output) as tmp, tempfile.TemporaryDirectory() as tdir:
        steps = []
        palette = None
        if fmt == "gif":
            palette = os.path.join(tdir, "palette.png")
            steps.append(palette_args(exe, os.fspath(movie), palette, width=width, fps=fps))
        steps.append(transcode_args(exe, os.fspath(movie), os.fspath(tmp), fmt, crf=crf,
                                    width=width, fps=fps, threads=threads, palette=palette))
        for args in steps:
            log.info("running %s", " ".join(args))
            proc = subprocess.run(args, capture_output=True, start_new_session=True)
            if proc.returncode != 0:
                raise ffmpeg_error(proc.returncode, f"making {output} from {movie}",
                                   proc.stderr.decode(errors="replace"))
