"""Small renderers, fields and a noisy CF file shared by the render tests."""

from __future__ import annotations

import json
import shutil
import subprocess

import numpy as np
import pytest
import xarray as xr
from conftest import missing_program_reason
from ncreel.config.settings import EncodeSettings, RenderSettings, SeriesSelection
from ncreel.render.frame import FrameRenderer
from ncreel.render.segment import FrameJob

needs_ffprobe = pytest.mark.skipif(shutil.which("ffprobe") is None,
                                   reason=missing_program_reason("ffprobe"))

W, H = 320, 180


def renderer(shape, *, blit, **kw):
    ny, nx = shape
    return FrameRenderer(shape=shape, width=W, height=H, dpi=60, cmap="viridis", vmin=-2.0,
                         vmax=2.0, x=np.linspace(-120, -60, nx), y=np.linspace(20, 60, ny),
                         title="tas [K]", xlabel="longitude", ylabel="latitude", blit=blit,
                         **kw)


def fields(n, shape, seed=0):
    data = np.random.default_rng(seed).normal(size=(n, *shape)).astype(np.float32)
    data[0, 2:5, 3:7] = np.nan  # masked cells are transparent in both paths
    return data


def ffprobe(path, entries="stream=nb_read_frames,codec_name,pix_fmt,width,height"):
    out = subprocess.run(["ffprobe", "-v", "error", "-count_frames", "-select_streams", "v:0",
                          "-show_entries", entries, "-of", "json", str(path)],
                         check=True, capture_output=True, text=True).stdout
    return json.loads(out)["streams"][0]


def write_noisy_nc(path):
    """A small CF file whose frames differ strongly, so any reordering would show."""
    n, ny, nx = 11, 9, 12
    data = np.random.default_rng(3).normal(size=(n, ny, nx)).astype(np.float32)
    ds = xr.Dataset(
        {"tas": (("time", "lat", "lon"), data, {"units": "K", "long_name": "noise"})},
        coords={"time": ("time", np.arange(n, dtype=float),
                         {"units": "days since 2000-01-01", "calendar": "standard"}),
                "lat": ("lat", np.linspace(-40, 40, ny), {"units": "degrees_north"}),
                "lon": ("lon", np.linspace(0, 330, nx), {"units": "degrees_east"})})
    ds.to_netcdf(path)
    return path


def spec(path, preset="ultrafast"):
    return FrameJob(
        series=SeriesSelection(paths=(str(path),), variable="tas", time_dim="time", select={},
                               lat=None, lon=None, time=None),
        render=RenderSettings.from_params({
            "width": 160, "height": 96, "dpi": 40, "cmap": "viridis",
            "map": {"coastlines": None, "borders": False, "projection": "PlateCarree",
                    "projection_params": {}}}),
        encode=EncodeSettings(fps=10, crf=18, preset=preset), vmin=-2.0, vmax=2.0)


def decode(path, w=160, h=96):
    raw = subprocess.run(["ffmpeg", "-v", "error", "-i", str(path), "-f", "rawvideo",
                          "-pix_fmt", "rgb24", "-"], check=True, capture_output=True).stdout
    return np.frombuffer(raw, np.uint8).reshape(-1, h, w, 3).astype(np.int16)
