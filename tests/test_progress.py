"""Progress lines in a job's log (``ncreel.progress``), at a bounded rate, not on stderr."""

import logging
import re

from ncreel.logs import configure
from ncreel.progress import Progress


class FakeClock:
    def __init__(self, step):
        self.t, self.step = 0.0, step

    def __call__(self):
        self.t += self.step
        return self.t


def test_progress_bounded_rate_and_job_log_only(tmp_path, capsys):
    root = logging.getLogger()
    saved_handlers, saved_level = root.handlers[:], root.level
    try:
        configure(tmp_path / "job.log")
        fast = Progress(1000, "shard 00000 frames 0..999", clock=FakeClock(0.01))
        for i in range(1, 1001):
            fast.update(i)
        # Fast work: one line per 10 %.
        assert fast.lines == 10
        slow = Progress(1000, "slow", clock=FakeClock(7.0))
        for i in range(1, 201):
            slow.update(i, rows_written=i * 10)
        # Slow work (7 s per frame): a line every 30 s at most, plus the 10 % marks.
        assert slow.lines <= 200 * 7 / 30 + 2 + 1
    finally:
        for h in root.handlers:
            if h not in saved_handlers:
                h.close()
        root.handlers[:] = saved_handlers
        root.setLevel(saved_level)
        logging.captureWarnings(False)
    text = (tmp_path / "job.log").read_text()
    assert "shard 00000 frames 0..999: 500/1000 frames (50 %)" in text
    assert "1000/1000 frames (100 %)" in text and "ETA 0 s" in text
    assert re.search(r"slow: \d+/1000 frames .*ETA \d+ s, rows_written \d+", text)
    assert "ncreel.progress" not in capsys.readouterr().err
