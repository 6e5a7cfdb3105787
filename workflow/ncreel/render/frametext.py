"""The text of a frame: a header band above the map, and the colour bar's label and ticks.

The header holds the title (``long_name [units]``) and the time label. It is a band across
the top of the figure, above the area the map and colour bar are laid out in, so the time
label never covers data. Its text is fitted to the frame's pixel size: the title is shrunk
(to at most half its size), wrapped onto two lines, or set on a row of its own above the
time label, whichever keeps it largest; what still does not fit ends with an ellipsis. The
band takes at most :data:`MAX_BAND` of the frame's height. The room for the time label is
that of the widest label of the run, so the title never moves from frame to frame.
"""

from __future__ import annotations

import heapq
import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
from matplotlib import rcParams
from matplotlib.font_manager import FontProperties
from matplotlib.text import Text
from matplotlib.ticker import Formatter

#: Largest share of the frame's height the header band may take.
MAX_BAND = 0.3
#: The title is shrunk down to this share of its normal size before it is wrapped.
MIN_TITLE_SCALE = 0.5
#: A one-line title beside the time label is kept while it is at least this share of its
#: normal size (a row of its own costs the map a line of height).
KEEP_ONE_ROW = 0.8
#: Time label reserved when the run's labels are not known.
DEFAULT_LABEL = "8888-88-88 88:88"
#: Longest title kept, in characters: two lines across a 1920-pixel frame at the normal
#: size. A longer one (a 200 000-character ``long_name``) is cut with an ellipsis before it
#: is measured or drawn, which otherwise cost every frame time in proportion to its length.
MAX_TITLE_CHARS = 200
#: A time label shrunk below this share of its normal size to fit the frame's width is
#: said in the log (a long time_format on a narrow frame: the date becomes unreadable).
MIN_LABEL_SCALE = 0.5

log = logging.getLogger(__name__)

#: A colour range narrower than this share of its magnitude is shown as one value.
CONSTANT_SPAN = 1e-5


@dataclass
class Header:
    """The fitted header: the title and time label texts, and where the band ends.

    Attributes
    ----------
    title : matplotlib.text.Text or None
        The title (None when there is none).
    label : matplotlib.text.Text
        The time label; its text is set per frame.
    bottom : float
        Lower edge of the band in figure coordinates (0-1): lay the axes out below it.
    row : str
        ``"side"``: the title left of the time label; ``"above"``: the title on a row of
        its own; ``""``: no title.
    label_size : (float, float)
        Pixel width and height kept for the time label.
    gap : float
        Pixels between the title and the time label on one row.
    """

    title: Text | None
    label: Text
    bottom: float
    row: str = ""
    label_size: tuple[float, float] = (0.0, 0.0)
    gap: float = 0.0


class _Measure:
    """Pixel width and height of a text at a font size, as `renderer` draws it."""

    def __init__(self, fig, renderer) -> None:
        self._text = Text(0, 0, "", parse_math=False)
        self._text.set_figure(fig)
        self._renderer = renderer

    def __call__(self, text: str, size: float) -> tuple[float, float]:
        self._text.set_text(text)
        self._text.set_fontsize(size)
        bb = self._text.get_window_extent(self._renderer)
        return bb.width, bb.height


def _two_lines(text: str, size: float, measure: _Measure) -> str | None:
    # The break (at a space, or after '_', '-', '/') that makes the longer line shortest.
    best, best_w = None, np.inf
    for i, ch in enumerate(text):
        if ch == " ":
            a, b = text[:i].rstrip(), text[i + 1:].lstrip()
        elif ch in "_-/" and 0 < i < len(text) - 1:
            a, b = text[:i + 1], text[i + 1:]
        else:
            continue
        if a and b:
            w = max(measure(a, size)[0], measure(b, size)[0])
            if w < best_w:
                best, best_w = f"{a}\n{b}", w
    return best


def _ellipsize(text: str, width: float, size: float, measure: _Measure) -> str:
    # Cut the last line, ending it with an ellipsis, until the text is `width` wide.
    if measure(text, size)[0] <= width:
        return text
    head, _, last = text.rpartition("\n")
    head = head + "\n" if head else ""
    lo, hi = 0, len(last)  # characters of `last` kept: fits at lo, not at hi
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if measure(head + last[:mid].rstrip() + "\u2026", size)[0] <= width:
            lo = mid
        else:
            hi = mid
    return head + last[:lo].rstrip() + "\u2026"


def _fit(text: str, width: float, height: float, size: float, measure: _Measure):
    """Largest font size up to `size` at which `text` fits ``width x height`` pixels.

    Returns ``(size, text, whole)``: the text may have been cut with an ellipsis (`whole`
    False) when it does not fit at :data:`MIN_TITLE_SCALE` of `size`. Height is never
    exceeded (the font shrinks further when it must).
    """
    if width <= 0 or height <= 0:
        return 0.0, text, False
    w, h = measure(text, size)
    f = size * min(1.0, height / h if h else 1.0, width / w if w else 1.0)
    f_height = size * min(1.0, height / h if h else 1.0)
    floor = min(size * MIN_TITLE_SCALE, f_height)
    f = max(f, floor)
    # Text extents grow about linearly with the size; hinting can add a pixel: step down.
    while f > floor:
        w, h = measure(text, f)
        if w <= width and h <= height:
            return f, text, True
        f = max(floor, f * 0.95)
    while measure(text, f)[1] > height and f > 0.5:
        f *= 0.95
    cut = _ellipsize(text, width, f, measure)
    return f, cut, cut == text


#: Most label shapes measured for the room of the time label (:func:`_widest`).
MAX_SHAPES = 200
_DIGITS = str.maketrans("0123456789", "8888888888")


def _widest(labels: Iterable[str], size: float, measure: _Measure) -> tuple[float, float]:
    # Digits have one width in the usual fonts, letters do not: every shape of label
    # (digits as 8) is measured, so "Wednesday" is found whatever its length in letters
    # (a strftime time_format's names); of more shapes, the longest.
    shapes = {str(s).translate(_DIGITS) for s in labels}
    sample = (heapq.nlargest(MAX_SHAPES, shapes, key=len) if len(shapes) > MAX_SHAPES
              else list(shapes)) if shapes else [DEFAULT_LABEL]
    sizes = [measure(s, size) for s in sample if s] or [measure("0", size)]
    return max(w for w, _ in sizes), max(h for _, h in sizes)


def bounded_title(title: str, limit: int = MAX_TITLE_CHARS) -> str:
    """Return `title` cut to at most `limit` characters with an ellipsis, keeping its units.

    A trailing ``" [units]"`` (as :func:`ncreel.render.frame` builds the title) is kept
    whole when it is short, so that the cut title still says its units.

    Parameters
    ----------
    title : str
        ``long_name [units]`` or any text.
    limit : int
        Most characters returned.

    Returns
    -------
    str
    """
    title = " ".join(title.split()) if len(title) > limit else title
    if len(title) <= limit:
        return title
    head, sep, units = title.rpartition(" [")
    tail = f" [{units}" if sep and units.endswith("]") and len(units) < limit // 4 else ""
    keep = limit - len(tail) - 1
    cut = (head if tail else title)[:keep].rstrip()
    return f"{cut}\u2026{tail}"


def fit_header(fig, renderer, title: str, labels: Sequence[str] = ()) -> Header:
    """Place the title and the time label in a band across the top of `fig`, fitted to it.

    Layouts tried, in this order: the title on one line, then on two lines, left of the
    time label (one row); the title on one line, then on two lines, centred on a row of
    its own with the time label right-aligned below it. The first layout whose title keeps
    :data:`KEEP_ONE_ROW` of its size wins, else the one with the largest whole title, or
    the largest title cut with an ellipsis when no whole one keeps half its size. The time
    label is never larger than the title. Sizes are measured with `renderer`, so the
    texts' window extents lie inside the figure.

    Parameters
    ----------
    fig : matplotlib.figure.Figure
        The frame's figure (its pixel size and dpi decide the fit).
    renderer : matplotlib.backend_bases.RendererBase
        The figure canvas's renderer.
    title : str
        Title text, drawn literally (no mathtext); cut to :data:`MAX_TITLE_CHARS`
        (:func:`bounded_title`).
    labels : sequence of str
        Every time label the frames will show (room is kept for the widest); empty: room
        for :data:`DEFAULT_LABEL`.

    Returns
    -------
    Header
    """
    measure = _Measure(fig, renderer)
    title = bounded_title(title)
    width, height = fig.bbox.width, fig.bbox.height
    px = fig.dpi / 72.0  # pixels per point
    f_title = FontProperties(size=rcParams["axes.titlesize"]).get_size_in_points()
    f_label = FontProperties(size="medium").get_size_in_points()
    band_max = MAX_BAND * height
    pad = max(1.0, 0.3 * f_label * px)
    # The time label, shrunk if even it is wider than the frame or taller than the band
    # (half the band when there is a title, which must fit beside or above it).
    wl, hl = _widest(labels, f_label, measure)
    room = (band_max - 2 * pad) * (0.5 if title else 1.0)
    scale = min(1.0, (width - 2 * pad) / wl if wl else 1.0, room / hl)
    if scale < 1.0:
        if wl and (width - 2 * pad) / wl < MIN_LABEL_SCALE:
            longest = max((str(s) for s in labels), key=len, default=DEFAULT_LABEL)
            log.warning("the time label %r is %.0f pixels wide at its normal size, and is "
                        "shrunk to %.0f%% of it to fit the %.0f-pixel frame: shorten config "
                        "time_format or make the frame wider", longest[:80], wl,
                        100 * scale * 0.97, width)
        f_label *= max(scale, 0.0) * 0.97
        wl, hl = _widest(labels, f_label, measure)
    gap = 0.8 * f_label * px
    vgap = 0.2 * f_label * px
    candidates = []
    if title:
        two = _two_lines(title, f_title, measure)
        for row, text in (("side", title), ("side", two), ("above", title), ("above", two)):
            if text is None:
                continue
            if row == "side":
                w, h = width - 2 * pad - wl - gap, band_max - 2 * pad
            else:
                w, h = width - 2 * pad, band_max - 2 * pad - hl - vgap
            f, fitted, whole = _fit(text, w, h, f_title, measure)
            if f > 0:
                candidates.append((row, f, fitted, whole))
    chosen = next((c for c in candidates if c[3] and c[1] >= KEEP_ONE_ROW * f_title), None)
    if chosen is None and candidates:
        # The largest whole title, unless it is smaller than half size: then the largest
        # (cut with an ellipsis). max() keeps the first of equals: fewer rows.
        whole = [c for c in candidates if c[3]]
        chosen = max(whole, key=lambda c: c[1]) if whole else None
        if chosen is None or chosen[1] < MIN_TITLE_SCALE * f_title:
            chosen = max(candidates, key=lambda c: c[1])
    top = height - pad
    title_text, row = None, ""
    if chosen is None:
        band = 2 * pad + hl
        label = fig.text((width - pad) / width, (top - hl / 2) / height, "", ha="right",
                         va="center", fontsize=f_label, parse_math=False)
    else:
        row, f, text, _ = chosen
        ht = measure(text, f)[1]
        if f < f_label:  # the time label is never larger than the title
            f_label = f
            wl, hl = _widest(labels, f_label, measure)
        if row == "side":
            rh = max(ht, hl)
            band = 2 * pad + rh
            y = (top - rh / 2) / height
            title_text = fig.text(pad / width, y, text, ha="left", va="center", fontsize=f,
                                  parse_math=False, multialignment="left")
            label = fig.text((width - pad) / width, y, "", ha="right", va="center",
                             fontsize=f_label, parse_math=False)
        else:
            band = 2 * pad + ht + vgap + hl
            title_text = fig.text(0.5, top / height, text, ha="center", va="top", fontsize=f,
                                  parse_math=False, multialignment="center")
            label = fig.text((width - pad) / width, (top - ht - vgap) / height, "",
                             ha="right", va="top", fontsize=f_label, parse_math=False)
    return Header(title=title_text, label=label, bottom=max(0.0, 1.0 - band / height),
                  row=row, label_size=(wl, hl), gap=gap)


def align_header(header: Header, fig, renderer, ax=None) -> None:
    """Move the header onto what the layout drew: just above it, and over its width.

    Once the axes are laid out (a map keeps its aspect, so it may not fill the height
    below the band), the title and time label line up with the left and right edges of
    the map axes `ax` where they fit its width, else of all axes (the colour bar
    included), else stay at the frame's margins; and they move down to sit just above
    whatever axes lie under that width.

    Parameters
    ----------
    header : Header
        As :func:`fit_header` placed it.
    fig : matplotlib.figure.Figure
        The figure, drawn once with its final layout.
    renderer : matplotlib.backend_bases.RendererBase
    ax : matplotlib.axes.Axes, optional
        The map (data) axes.
    """
    boxes = [a.get_tightbbox(renderer) for a in fig.axes if a.get_visible()]
    boxes = [b for b in boxes if b is not None and b.width > 0 and b.height > 0]
    if not boxes:
        return
    width, height = fig.bbox.width, fig.bbox.height
    wl = header.label_size[0]
    tw = header.title.get_window_extent(renderer).width if header.title is not None else 0.0
    need = tw + header.gap + wl if header.row == "side" else max(tw, wl)
    spans = [(max(0.0, min(b.x0 for b in boxes)), min(width, max(b.x1 for b in boxes)))]
    if ax is not None:
        box = ax.get_tightbbox(renderer)
        if box is not None and box.width > 0:
            spans.insert(0, (max(0.0, box.x0), min(width, box.x1)))
    span = next(((lo, hi) for lo, hi in spans if hi - lo >= need), None)
    lo, hi = span if span is not None else (0.0, width)
    below = [b.y1 for b in boxes if b.x1 > lo and b.x0 < hi] or [b.y1 for b in boxes]
    drop = max(0.0, header.bottom * height - max(below)) / height
    for text in (header.title, header.label):
        if text is None:
            continue
        x, y = text.get_position()
        if span is not None:
            if text is header.label:
                x = hi / width
            elif header.row == "side":
                x = lo / width
            else:  # centred on a row of its own
                x = (lo + hi) / 2 / width
        text.set_position((x, y - drop))


def add_caption(fig, renderer, caption: str) -> float:
    """Put `caption` in one line at the bottom left of `fig`; return its band's height.

    The line is in the small font of tick labels, shrunk (to :data:`MIN_TITLE_SCALE`) and
    then cut with an ellipsis to fit the frame's width; drawn literally (no mathtext).

    Returns
    -------
    float
        Height in figure coordinates of the band the caption takes (0 without one): the
        layout keeps the axes above it.
    """
    if not caption:
        return 0.0
    w_px, h_px = fig.bbox.width, fig.bbox.height
    size = FontProperties(size="small").get_size_in_points()
    margin = 0.4 * size * fig.dpi / 72.0
    text = " ".join(str(caption).split())  # one line
    f, text, _ = _fit(text, w_px - 2 * margin, h_px / 4, size, _Measure(fig, renderer))
    artist = fig.text(margin / w_px, margin / h_px, text, ha="left", va="bottom",
                      fontsize=f, parse_math=False)
    height = artist.get_window_extent(renderer).height
    return (height + 2 * margin) / h_px


def keep_below(fig, top: float) -> bool:
    """Squeeze the axes of `fig` below `top` (figure coordinates) if any reaches above it.

    For frames too small for the constrained layout, which then leaves the axes where they
    were; positions are scaled towards the bottom, keeping their order. Returns whether
    anything moved (the figure must then be drawn again).
    """
    tops = [ax.get_position(original=True).y1 for ax in fig.axes]
    if not tops or max(tops) <= top + 1e-9:
        return False
    k = top / max(tops)
    for ax in fig.axes:
        x0, y0, w, h = ax.get_position(original=True).bounds
        ax.set_position((x0, y0 * k, w, h * k))
    return True


def _plain(values: np.ndarray) -> list[str]:
    # Fixed decimals, the fewest that keep every tick (to 1e-6 of their spacing) and tell
    # them apart; per-tick 'g' where the magnitudes need exponents.
    v = np.asarray(values, dtype=np.float64)
    if v.size == 0:
        return []
    fin = v[np.isfinite(v)]
    big = np.abs(fin).max(initial=0.0)
    nonzero = np.abs(fin[fin != 0])
    small = nonzero.min() if nonzero.size else 1.0
    steps = np.diff(np.unique(fin))
    tol = 1e-6 * (steps.min() if steps.size else max(big, 1e-300))
    if big < 1e7 and small >= 1e-4:
        for d in range(0, 16):
            if (np.abs(np.round(fin, d) - fin) <= tol).all():
                break
        texts = [f"{x:.{d}f}" for x in v]
    else:
        for p in range(1, 17):
            if (np.abs(np.array([float(f"{x:.{p}g}") for x in fin]) - fin) <= tol).all():
                break
        texts = [f"{x:.{p}g}".replace("e+0", "e").replace("e-0", "e-").replace("e+", "e")
                 for x in v]
    out = []
    for t in texts:
        if t.lstrip("-").strip("0.") == "":  # -0, -0.00: zero
            t = t.lstrip("-")
        out.append(t.replace("-", "\u2212") if rcParams["axes.unicode_minus"] else t)
    return out


class PlainFormatter(Formatter):
    """Tick labels as plain numbers, with no offset (``1e-7+1``) and no shared multiplier.

    The ticks of one axis share their number of decimals (the fewest that tell them apart
    and keep them exact); only magnitudes below 1e-4 or of 1e7 and more use exponents,
    written on each tick (``2.5e-8``).
    """

    def __call__(self, x, pos=None) -> str:
        """Label of one value `x` (`pos`, the tick's index, is not used)."""
        return _plain(np.array([x]))[0]

    def format_ticks(self, values) -> list[str]:
        """Labels of all ticks of an axis, sharing their number of decimals."""
        return _plain(np.asarray(values))


def style_colorbar(cbar, vmin: float, vmax: float, units: str = "") -> None:
    """Label the colour bar with `units` and give it readable ticks.

    Ticks are plain numbers (:class:`PlainFormatter`). A range narrower than
    :data:`CONSTANT_SPAN` of its magnitude (a constant field, whose limits are the value
    and a hair above it) gets one tick, at its middle, labelled with 6 significant digits.
    """
    cbar.formatter = PlainFormatter()
    lo, hi = float(vmin), float(vmax)
    if np.isfinite(lo) and np.isfinite(hi) and abs(hi - lo) <= CONSTANT_SPAN * max(abs(lo),
                                                                                   abs(hi)):
        mid = (lo + hi) / 2
        cbar.set_ticks([mid], labels=[_plain(np.array([float(f"{mid:.6g}")]))[0]])
    if units:
        cbar.set_label(units, parse_math=False)
