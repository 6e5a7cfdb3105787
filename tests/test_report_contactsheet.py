"""The contact sheet shows each frame large enough to read its text."""

from __future__ import annotations

import numpy as np
from ncreel.render.frame import write_png
from ncreel.report.contactsheet import contact_sheet, frame_labels
from PIL import Image


def test_frames_keep_up_to_480_pixels_of_width(tmp_path):
    frames = []
    for t in range(4):
        p = tmp_path / f"frame_{t:06d}.png"
        Image.fromarray(np.full((270, 480, 3), 60 * t, np.uint8)).save(p)
        frames.append((t, p))
    out = tmp_path / "sheet.png"
    drawn = contact_sheet(frames, {t: f"{1860 + t}" for t in range(4)}, out, title="run demo")
    assert drawn == [0, 1, 2, 3]
    with Image.open(out) as sheet:
        # Two columns of frames shown at (close to) their own 480-pixel width.
        assert sheet.width >= 2 * 440, sheet.size


def test_frames_carry_their_time_labels_for_the_sheet(tmp_path):
    """A shard writes each kept frame's time label into the PNG (its Description text,
    UTF-8), so the sheet takes its titles from the frames, not from a second read of the
    input; a frame without one (an earlier version's) gives None: the input's labels."""
    rgba = np.zeros((8, 12, 4), np.uint8)
    labels = {0: "1860-06-01", 7: "TIME = 4748.91 hour since 0000-01-01 · 360_day °C"}
    frames = []
    for t, label in labels.items():
        p = tmp_path / f"frame_{t:06d}.png"
        write_png(rgba, p, description=label)
        frames.append((t, p))
    assert frame_labels(frames) == labels
    out = tmp_path / "sheet.png"
    assert contact_sheet(frames, labels, out) == [0, 7]
    old = tmp_path / "frame_000009.png"
    write_png(rgba, old)
    assert frame_labels([*frames, (9, old)]) is None
