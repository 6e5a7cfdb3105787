"""The contact sheet shows each frame large enough to read its text."""

from __future__ import annotations

import numpy as np
from ncreel.report.contactsheet import contact_sheet
from PIL import Image


def test_frames_keep_up_to_480_pixels_of_width(tmp_path):
    frames = []
    for t in range(4):
        p = tmp_path / f"frame_{t:06d}.png"
        Image.fromarray(np.full((270, 480, 3), 60 * t, np.uint8)).save(p)
        frames.append((t, p))
    out = tmp_path / "sheet.png"
    drawn = contact_sheet(frames, [f"{1860 + t}" for t in range(4)], out, title="run demo")
    assert drawn == [0, 1, 2, 3]
    with Image.open(out) as sheet:
        # Two columns of frames shown at (close to) their own 480-pixel width.
        assert sheet.width >= 2 * 440, sheet.size
