"""Config decorate: a user's function drawn once on the static figure, checked per run."""

from __future__ import annotations

import logging
import sys
import textwrap

import numpy as np
import pytest
import yaml
from conftest import ROOT
from matplotlib.figure import Figure
from ncreel.config.settings import RenderSettings, SeriesSelection
from ncreel.core.errors import NcreelError
from ncreel.jobs.runconfig import load_config
from ncreel.region.selection import open_selection
from ncreel.render.decorate import decorate_params
from ncreel.render.frame import frame_difference
from ncreel.render.segment import make_renderer
from snakemake.utils import validate
from test_overlays import write_weather

#: Station markers: red squares at three places, drawn through info.to_map.
STATIONS = """
import numpy as np

STATIONS = [(-105.0, 40.0), (2.35, 48.85), (151.2, -33.9)]


def stations(fig, ax, info):
    lon, lat = np.array(STATIONS).T
    x, y = info.to_map(lon, lat)
    ax.plot(x, y, linestyle="none", marker="s", markersize=8, color="#ff0000",
            markeredgewidth=0, zorder=5)
    ax.text(0.01, 0.01, info.variable + " " + info.units, transform=ax.transAxes)


def ticking(fig, ax, info):
    # A text that changes at every draw: the saved background cannot stay right.
    text = ax.text(0.5, 0.5, "0", transform=ax.transAxes, fontsize=20, zorder=5)
    count = [0]

    def tick(event):
        count[0] += 1
        text.set_text(str(count[0]))

    fig.canvas.mpl_connect("draw_event", tick)


def broken(fig, ax, info):
    raise RuntimeError("no station file")


def resize(fig, ax, info):
    fig.set_size_inches(5, 5)


def animated(fig, ax, info):
    ax.text(0.5, 0.5, "never drawn", transform=ax.transAxes, animated=True)


def clears(fig, ax, info):
    ax.clear()


def removes(fig, ax, info):
    for artist in [*ax.collections, *ax.lines]:  # the field's mesh, coastlines
        artist.remove()
    ax.plot([0], [0], "k.")


def hangs(fig, ax, info):
    import time

    while True:
        try:
            time.sleep(3600)
        except Exception:  # a function that swallows errors must still be stopped
            pass


NOT_A_FUNCTION = 3
"""


@pytest.fixture
def stations_module(tmp_path, monkeypatch):
    (tmp_path / "my_marks.py").write_text(textwrap.dedent(STATIONS))
    monkeypatch.syspath_prepend(str(tmp_path))
    yield "my_marks"
    sys.modules.pop("my_marks", None)


def weather(tmp_path):
    path = write_weather(tmp_path / "w.nc", n_time=4)
    return open_selection(SeriesSelection(paths=[str(path)], variable="tas", time_dim=None,
                                          select={}, lat=None, lon=None, time=None))


def settings(spec, projection="PlateCarree", coastlines=False):
    return RenderSettings.from_params({
        "width": 240, "height": 150, "dpi": 50, "cmap": "viridis",
        "map": {"coastlines": coastlines, "borders": False, "projection": projection,
                "projection_params": {}},
        "decorate": decorate_params(spec)})


def frames(renderer, series):
    out = []
    for t in range(series.n_time):
        field = series.read(t, t + 1)[0] + 3.0 * t  # a different field each frame
        out.append(renderer.draw(field, f"t{t}").copy())
    return out


@pytest.mark.parametrize("projection", ["PlateCarree", "Robinson"])
def test_station_markers_are_in_every_frame_and_exact_against_a_full_redraw(
        tmp_path, stations_module, projection):
    rs = settings(f"{stations_module}:stations", projection)
    with weather(tmp_path) as s:
        fast = make_renderer(s, rs, vmin=270, vmax=310)
        full = make_renderer(s, rs, vmin=270, vmax=310, blit=False)
        plain = make_renderer(s, settings(None, projection), vmin=270, vmax=310)
        a, b, c = frames(fast, s), frames(full, s), frames(plain, s)
        interior = fast.interior()
    red = np.all(a[0][..., :3] == (255, 0, 0), axis=-1)
    # Three 8-point squares at 50 dpi: about 5 x 5 pixels each, inside the map.
    assert 3 * 16 <= red.sum() <= 3 * 36
    assert not np.all(c[0][..., :3] == (255, 0, 0), axis=-1).any()
    assert not fast.full_redraw
    for fa, fb in zip(a, b, strict=True):
        assert np.array_equal(red, np.all(fa[..., :3] == (255, 0, 0), axis=-1))
        assert np.array_equal(fa[red], fb[red])  # the markers, pixel for pixel
        # Inside the cells, markers and their antialiased edges included: identical.
        diff = frame_difference(fa, fb, area=interior)
        assert diff["max_difference"] == 0, diff
    assert not np.array_equal(a[0], a[-1])  # the field did change under the markers


@pytest.mark.parametrize("name", ["clears", "removes"])
def test_a_decorate_removing_the_maps_artists_stops_the_render_with_one_line(
        tmp_path, stations_module, name):
    # Before the check, a cleared map drew the background where the field should be.
    with weather(tmp_path) as s, pytest.raises(NcreelError) as err:
        make_renderer(s, settings(f"{stations_module}:{name}", coastlines=True), vmin=270,
                      vmax=310)
    assert (f"config key 'decorate': '{stations_module}:{name}' removed or replaced what "
            "the figure held" in str(err.value)) and "\n" not in str(err.value)


def test_a_decoration_that_changes_between_draws_falls_back_to_full_redraws(
        tmp_path, stations_module, caplog):
    rs = settings(f"{stations_module}:ticking")
    with weather(tmp_path) as s, caplog.at_level(logging.WARNING, "ncreel.render"):
        fast = make_renderer(s, rs, vmin=270, vmax=310)
        a = frames(fast, s)
        interior = fast.interior()
        full = make_renderer(s, settings(None), vmin=270, vmax=310, blit=False)
        b = frames(full, s)
    assert fast.full_redraw
    warnings = [r for r in caplog.records if "decorate" in r.getMessage()]
    assert len(warnings) == 1 and warnings[0].levelno == logging.WARNING
    assert "seen at frame 1" in warnings[0].getMessage()
    # Drawn in full: the ticking number differs from frame to frame, and every frame's
    # field is what a full redraw of it shows.
    assert not np.array_equal(a[1], a[2])
    field_only = interior & (np.abs(a[1].astype(int) - a[2].astype(int)).max(-1) == 0)
    for fa, fb in zip(a, b, strict=True):
        assert frame_difference(fa, fb, area=field_only)["max_difference"] == 0


def test_a_static_decoration_is_checked_only_on_a_few_frames(tmp_path, stations_module,
                                                            monkeypatch):
    rs = settings(f"{stations_module}:stations")
    with weather(tmp_path) as s:
        fast = make_renderer(s, rs, vmin=270, vmax=310)
        checks = []
        real = fast._background_changed
        monkeypatch.setattr(fast, "_background_changed", lambda: checks.append(1) or real())
        field = s.read(0, 1)[0]
        for _ in range(20):
            fast.draw(field, "x")
    assert len(checks) == 6  # frames 1, 2, 3, 5, 9, 17
    assert not fast.full_redraw


def user_config(**values):
    config = yaml.safe_load((ROOT / "config" / "config.yaml").read_text()) or {}
    return {**config, **values}


@pytest.mark.parametrize("spec, message", [
    ("no_such_module_xyz:f", "config key 'decorate': cannot import 'no_such_module_xyz'"),
    ("{m}:missing", "config key 'decorate': module '{m}' has no 'missing'"),
    ("{m}:NOT_A_FUNCTION", "config key 'decorate': '{m}:NOT_A_FUNCTION' is a int, not a"),
    ("{m}:broken", "config key 'decorate': '{m}:broken' raised RuntimeError: no station"),
    ("{m}:resize", "config key 'decorate': '{m}:resize' changed the figure's size to "
                   "500x500 pixels (dpi 100); the frame is 960x540"),
    ("{m}:animated", "config key 'decorate': '{m}:animated' added an animated artist (Text)"),
    ("{m}:clears", "config key 'decorate': '{m}:clears' removed or replaced what the "
                   "figure held"),
    ("not a spec", "config key 'decorate'"),
])
def test_bad_decorate_stops_before_any_job_with_one_line(sample_nc, stations_module, spec,
                                                         message):
    spec, message = spec.format(m=stations_module), message.format(m=stations_module)
    with pytest.raises(NcreelError) as err:
        load_config(user_config(input=str(sample_nc), decorate=spec), validate=validate)
    assert message in str(err.value) and "\n" not in str(err.value), str(err.value)


def test_a_decorate_that_never_returns_stops_the_check_with_one_line(
        sample_nc, stations_module, monkeypatch):
    import time

    from ncreel.render import decorate

    monkeypatch.setattr(decorate, "CHECK_SECONDS", 1.0)
    started = time.monotonic()
    with pytest.raises(NcreelError) as err:
        load_config(user_config(input=str(sample_nc), decorate=f"{stations_module}:hangs"),
                    validate=validate)
    assert time.monotonic() - started < 30
    assert f"config key 'decorate': '{stations_module}:hangs' did not return within 1 s" \
        in str(err.value) and "\n" not in str(err.value)


def test_a_slow_decorate_in_a_render_job_is_said_in_its_log(monkeypatch, caplog):
    import time

    from ncreel.render import decorate

    monkeypatch.setattr(decorate, "CHECK_SECONDS", 0.05)
    fig = Figure(figsize=(2, 1), dpi=50)
    with caplog.at_level(logging.WARNING, "ncreel.render.decorate"):
        decorate.call_decorate(lambda *a: time.sleep(0.5), "slow:f", fig, fig.add_subplot(),
                               None)
        decorate.call_decorate(lambda *a: None, "fast:f", fig, fig.axes[0], None)
        time.sleep(0.2)
    said = [r.getMessage() for r in caplog.records]
    assert said == ["config key 'decorate': 'slow:f' has not returned after 0.05 s (it is "
                    "called once per render worker, before the first frame)"]


def test_a_good_decorate_reaches_the_render_params_with_its_source_digest(
        sample_nc, stations_module, tmp_path):
    spec = f"{stations_module}:stations"
    rc = load_config(user_config(input=str(sample_nc), decorate=spec), validate=validate)
    assert rc.render["decorate"]["function"] == spec
    digest = rc.render["decorate"]["source"]
    assert len(digest) == 16
    # Editing the function changes the params, so Snakemake reruns the frames.
    (tmp_path / "my_marks.py").write_text(textwrap.dedent(STATIONS) + "\n# edited\n")
    assert decorate_params(spec)["source"] != digest
    plain = load_config(user_config(input=str(sample_nc)), validate=validate)
    assert "decorate" not in plain.render
