"""Panel layouts (config ``panels``): planned at parse time, read by the jobs, step by step.

:func:`plan_panels` checks a layout before any job (unknown variables, differences of
mismatched grids, references out of range, meshes, time steps missing in one panel) and
returns the plain dict the rules pass on. A panel's time steps are matched to the movie's
(the top-level input's) by the frames' time labels, so files with different time axes
(another scenario starting earlier or ending later) show the same time in every
panel. :class:`PanelReader` reads every panel's slab for a range of the movie's steps only,
and computes the difference panels from their sources.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence

import numpy as np

from ncreel.core.errors import NcreelError
from ncreel.input.units import same_units

#: Cmap of a difference panel without its own: diverging, white at zero.
DIFFERENCE_CMAP = "RdBu_r"


def _ref(value, names: dict, n: int, where: str) -> int:
    # A panel reference: a 0-based index or a panel's name.
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise NcreelError(f"config key '{where}': {value!r} is not a panel index or name")
    if isinstance(value, str):
        if value not in names:
            known = ", ".join(repr(k) for k in names) or "none"
            raise NcreelError(f"config key '{where}': no panel is named {value!r} (named: "
                              f"{known}); use a panel's name or its 0-based index")
        return names[value]
    if not 0 <= value < n:
        raise NcreelError(f"config key '{where}': panel index {value} is out of range "
                          f"(0..{n - 1}); panels are counted from 0")
    return value


def _own(panel: Mapping, key: str, top):
    # The panel's own setting, else the top-level one (whose default is the schema's).
    return panel[key] if key in panel else top


def _step_runs(movie_labels: Sequence[str], labels: Sequence[str]) -> list | None:
    # [[movie_start, panel_start, length], ...] covering every movie step, or None if a
    # label is missing. First occurrence of a repeated label.
    where: dict[str, int] = {}
    for i, label in enumerate(labels):
        where.setdefault(label, i)
    runs: list[list[int]] = []
    for t, label in enumerate(movie_labels):
        j = where.get(label)
        if j is None:
            return None
        if runs and runs[-1][1] + runs[-1][2] == j and runs[-1][0] + runs[-1][2] == t:
            runs[-1][2] += 1
        else:
            runs.append([t, j, 1])
    return runs


def plan_panels(panels: Sequence[Mapping] | None, *, config: Mapping, selection,
                movie_labels: Sequence[str], movie_paths: Sequence[str],
                width: int, height: int, columns: int | None = None) -> dict | None:
    """Check a ``panels`` layout against its files and plan how jobs read it.

    Parameters
    ----------
    panels : sequence of mapping or None
        Config ``panels`` (validated by the schema).
    config : mapping
        The validated config: ``input``, ``variable``, ``select``, ``cmap``, ``vmin`` and
        ``vmax`` are the panels' defaults (a difference panel's cmap is
        :data:`DIFFERENCE_CMAP`, its limits its own); ``contours`` and ``vectors`` (absent:
        none) are drawn on the panels whose files are the top-level input and that do not
        set their own (a panel's ``null``: none there), never on a difference panel.
    selection : ncreel.config.settings.SeriesSelection
        The movie's (top-level) selection; panels share its time dimension, coordinate
        names and region.
    movie_labels : sequence of str
        The movie's time labels, one per step
        (:func:`ncreel.render.timelabels.series_labels`).
    movie_paths : sequence of str
        The top-level input's files (named when a step is missing).
    width, height : int
        Frame size in pixels (a panel needs at least 64 x 48 of them).
    columns : int, optional
        Config ``panel_columns``.

    Returns
    -------
    dict or None
        None without panels; else ``columns`` and ``panels``, one plain dict each:
        ``series`` (a selection's params; None for a difference), ``steps`` (runs
        ``[movie_start, panel_start, length]`` of its own time indices; None for a
        difference), ``difference_of`` (two panel indices or None), ``cmap``, ``vmin``,
        ``vmax``, ``title``, ``units``, ``shape`` (``[ny, nx]``), ``contours`` and
        ``vectors`` (the panel's overlays with defaults filled in, or None).

    Raises
    ------
    NcreelError
        One line naming the panel (``panels[i]``) and what to change: an unknown variable
        or file, an unstructured mesh, a time step of the movie missing in its files, a
        difference of an out-of-range or unknown panel, of itself or of another
        difference, of panels on different grids or in different units, or more panels than
        the frame fits; overlays a panel cannot draw
        (:func:`ncreel.render.overlays.check_overlays` on its files), overlays on a
        difference panel, or top-level overlays no panel shows.
    """
    if not panels:
        return None
    from ncreel.config.settings import SeriesSelection
    from ncreel.input.coordsel import resolve_sel
    from ncreel.input.source import resolve_paths
    from ncreel.region.selection import open_selection
    from ncreel.render.overlays import overlay_settings
    from ncreel.render.panels import MAX_PANELS, grid_size
    from ncreel.render.timelabels import series_labels

    n = len(panels)
    rows, cols = grid_size(n, columns, (width, height))
    if n > MAX_PANELS or width // cols < 64 or height // rows < 48:
        raise NcreelError(f"config key 'panels': {n} panels in {rows} x {cols} do not fit a "
                          f"{width} x {height} frame (at most {MAX_PANELS} panels, each at "
                          "least 64 x 48 pixels); use fewer panels or a larger width/height")
    names = {}
    for i, p in enumerate(panels):
        if "name" in p:
            if p["name"] in names:
                raise NcreelError(f"config key 'panels[{i}].name': {p['name']!r} is also the "
                                  f"name of panels[{names[p['name']]}]; give each its own")
            names[p["name"]] = i
    planned: list[dict] = []
    grids: dict[int, tuple] = {}
    top_overlays = overlay_settings(config.get("contours"), config.get("vectors"))
    top_paths = tuple(selection.paths)  # config input resolved (a catalog's assets)
    if any(top_overlays) and not any(
            "difference_of" not in p and "input" not in p
            or "difference_of" not in p and tuple(resolve_paths(p["input"])) == top_paths
            for p in panels):
        key = "contours" if top_overlays[0] else "vectors"
        raise NcreelError(f"config key '{key}': no panel shows the top-level input "
                          f"{', '.join(top_paths)}, where top-level overlays are drawn; "
                          f"give the panels their own {key} (panels[i].{key})")
    for i, p in enumerate(panels):
        where = f"panels[{i}]"
        if "difference_of" in p:
            for key in ("input", "variable", "select", "sel"):
                if key in p:
                    raise NcreelError(f"config key '{where}.{key}': a difference panel reads "
                                      "its two panels' data; remove the key")
            for key in ("contours", "vectors"):
                if p.get(key):
                    raise NcreelError(f"config key '{where}.{key}': a difference panel has "
                                      "no file of its own, and a difference of contour lines "
                                      "or arrows means nothing; put the overlay on one of "
                                      "its two panels")
            planned.append({"series": None, "steps": None, "difference_of": None,
                            "shape": None,
                            "cmap": _own(p, "cmap", DIFFERENCE_CMAP), "vmin": p.get("vmin"),
                            "vmax": p.get("vmax"), "title": p.get("title") or p.get("name"),
                            "units": "", "contours": None, "vectors": None})
            continue
        paths = resolve_paths(p["input"]) if "input" in p else list(top_paths)
        overlays = _panel_overlays(p, top_overlays, same_input=tuple(paths) == top_paths)
        variable = _own(p, "variable", config["variable"])
        try:
            # The panel's own level choice (select and/or sel), else the top level's.
            own = "select" in p or "sel" in p
            select = resolve_sel(paths[0], variable,
                                 (p.get("sel") or {}) if own else config["sel"],
                                 (p.get("select") or {}) if own else config["select"],
                                 key=f"{where}.sel" if "sel" in p else "sel",
                                 time_dim=selection.time_dim)
            sel = SeriesSelection(paths=paths, variable=variable,
                                  time_dim=selection.time_dim, select=select,
                                  lat=selection.lat, lon=selection.lon, time=selection.time,
                                  region=selection.region)
            with open_selection(sel) as s:
                if getattr(s, "mesh", None) is not None:
                    raise NcreelError(f"config key '{where}': '{sel.variable}' in "
                                      f"{', '.join(paths)} is on an unstructured mesh; panels "
                                      "draw grids only (use a single field for a mesh)")
                s.check_one_geometry()
                own = series_labels(s)
                runs = _step_runs(movie_labels, own)
                if runs is None:
                    own = set(own)
                    missing = [lab for lab in movie_labels if lab not in own]
                    raise NcreelError(
                        f"config key '{where}': {', '.join(paths)} has no step at "
                        f"{missing[0]!r} ({len(missing)} of the {len(movie_labels)} steps of "
                        f"{', '.join(movie_paths)} missing); panels must cover the same "
                        "times: give files that do, or cut the top-level input to them")
                _check_panel_overlays(s, i, p, *overlays)
                lat, lon = s.cell_coordinates()
                grids[i] = (s.shape[1:], lon, lat, s.has_lat_lon)
                title = p.get("title") or p.get("name") or (
                    f"{s.long_name} [{s.units}]" if s.units else s.long_name)
                planned.append({"series": s.spec(), "steps": runs, "difference_of": None,
                                "shape": [s.ny, s.nx],
                                "cmap": _own(p, "cmap", config["cmap"]),
                                "vmin": _own(p, "vmin", config["vmin"]),
                                "vmax": _own(p, "vmax", config["vmax"]), "title": title,
                                "units": s.units, "contours": overlays[0],
                                "vectors": overlays[1]})
        except NcreelError as err:
            text = str(err)
            raise NcreelError(text if text.startswith("config key") else f"{where}: {text}"
                              ) from None
    for i, p in enumerate(panels):
        if "difference_of" not in p:
            continue
        where = f"panels[{i}].difference_of"
        a, b = (_ref(v, names, n, where) for v in p["difference_of"])
        for k in (a, b):
            if k == i or "difference_of" in panels[k]:
                raise NcreelError(f"config key '{where}': panel {k} is "
                                  f"{'this panel' if k == i else 'a difference itself'}; "
                                  "a difference is of two panels that read data")
        ga, gb = grids[a], grids[b]
        if not _same_grid(ga, gb):
            raise NcreelError(f"config key '{where}': panels {a} ({planned[a]['title']}, "
                              f"grid {ga[0][0]} x {ga[0][1]}) and {b} ({planned[b]['title']}, "
                              f"grid {gb[0][0]} x {gb[0][1]}) are not on the same grid; a "
                              "difference needs the same cells (regrid one file first)")
        ua, ub = planned[a]["units"], planned[b]["units"]
        same = same_units(ua, ub)
        if not same:  # K minus degC would be drawn as a 273 K "difference"
            unsure = ("" if same is False else
                      " (compared as text: not both are UDUNITS units ncreel can read)")
            raise NcreelError(f"config key '{where}': panels {a} ({planned[a]['title']}) and "
                              f"{b} ({planned[b]['title']}) are in different units ({ua!r}, "
                              f"{ub!r}){unsure}; a difference needs the same units (convert "
                              "one file first)")
        grids[i] = ga
        d = planned[i]
        d["difference_of"] = [a, b]
        d["units"] = planned[a]["units"]
        d["shape"] = planned[a]["shape"]
        if not d["title"]:
            d["title"] = f"{planned[a]['title']} \u2212 {planned[b]['title']}"
    return {"columns": columns, "panels": planned}


def _panel_overlays(panel: Mapping, top: tuple, *, same_input: bool) -> tuple:
    # (contours, vectors) of a panel that reads data, defaults filled in: its own keys
    # (null: none), else the top-level ones when its files are the top-level input.
    from ncreel.render.overlays import overlay_settings

    own = overlay_settings(panel.get("contours"), panel.get("vectors"))
    return tuple(own[k] if key in panel else (top[k] if same_input else None)
                 for k, key in enumerate(("contours", "vectors")))


def _check_panel_overlays(series, i: int, panel: Mapping, contours, vectors) -> None:
    # check_overlays on the panel's series, its message naming the panel's key.
    from ncreel.render.overlays import check_overlays

    try:
        check_overlays(series, contours, vectors)
    except NcreelError as err:
        text = str(err)
        for key in ("contours", "vectors"):
            if text.startswith(f"config '{key}"):
                rest = text[len(f"config '{key}"):]
                text = (f"config key 'panels[{i}].{key}{rest}" if key in panel else
                        f"config key '{key}{rest} (drawn on panels[{i}], whose files are "
                        "the top-level input)")
                break
        raise NcreelError(text) from None


def _same_grid(ga: tuple, gb: tuple) -> bool:
    # Same shape and cell centres (to float32 precision: files store coordinates both ways);
    # (shape, lon, lat, has_lat_lon), coordinates None for grids in plain indices.
    if ga[0] != gb[0] or ga[3] != gb[3]:
        return False
    for u, v in ((ga[1], gb[1]), (ga[2], gb[2])):
        if (u is None) != (v is None):
            return False
        if u is not None and (np.shape(u) != np.shape(v) or not np.allclose(
                u, v, rtol=0, atol=1e-5, equal_nan=True)):
            return False
    return True


class PanelReader:
    """The fields of every panel for a range of the movie's time steps.

    Parameters
    ----------
    layout : dict
        :func:`plan_panels`' result.

    Notes
    -----
    A context manager: the panels' files are opened on entering (each series once, shared
    by the panels that read the same selection) and closed on leaving.
    """

    def __init__(self, layout: Mapping) -> None:
        self.layout = layout
        self.panels = list(layout["panels"])
        self._stack = contextlib.ExitStack()
        self.series: list = []

    def __enter__(self) -> PanelReader:
        from ncreel.config.settings import SeriesSelection
        from ncreel.region.selection import open_selection

        opened: dict[str, object] = {}
        try:
            for p in self.panels:
                if p["series"] is None:
                    self.series.append(None)
                    continue
                key = repr(sorted(p["series"].items()))
                if key not in opened:
                    sel = SeriesSelection.from_params(p["series"])
                    opened[key] = self._stack.enter_context(open_selection(sel))
                self.series.append(opened[key])
        except BaseException:
            self._stack.close()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self._stack.close()

    def shape(self, i: int) -> tuple[int, int]:
        """Grid ``(ny, nx)`` of panel `i` (a difference: its first panel's)."""
        p = self.panels[i]
        if p["difference_of"] is not None:
            return self.shape(p["difference_of"][0])
        s = self.series[i]
        return (s.ny, s.nx)

    def step_bytes(self) -> int:
        """Bytes of one movie step over all panels and their overlays (float64 bound)."""
        from ncreel.render.overlays import overlay_variables

        return sum(8 * int(np.prod(self.shape(i))) * (1 + sum(
            len(g) for g in overlay_variables(p.get("contours"), p.get("vectors"))))
            for i, p in enumerate(self.panels))

    def overlay_view(self, i: int, n_time: int) -> _OverlayView:
        """Panel `i`'s file over the movie's `n_time` steps, as overlays read a series.

        What :func:`ncreel.render.overlays.overlay_limits` and
        :func:`~ncreel.render.overlays.read_overlay_fields` read: ``n_time``, ``ny``,
        ``nx`` and ``read_variable(name, start, stop)`` in the movie's steps.
        """
        return _OverlayView(self, i, n_time)

    def read_overlays(self, start: int, stop: int) -> list[list]:
        """Every panel's overlay fields for movie steps ``start:stop``.

        Returns
        -------
        list of list of tuple of numpy.ndarray
            Per panel :func:`ncreel.render.overlays.read_overlay_fields`' result (``[]``
            for a panel without overlays), arrays of shape (stop - start, ny, nx).
        """
        from ncreel.render.overlays import read_overlay_fields

        return [read_overlay_fields(self.overlay_view(i, stop), p.get("contours"),
                                    p.get("vectors"), start, stop)
                if p.get("contours") or p.get("vectors") else []
                for i, p in enumerate(self.panels)]

    def read(self, start: int, stop: int) -> list[np.ndarray]:
        """Every panel's fields for movie steps ``start:stop``.

        Returns
        -------
        list of numpy.ndarray
            One per panel, shape ``(stop - start, ny, nx)``, in the panel's units; a
            difference panel is its first panel minus its second (float64 when they differ
            in type; NaN where either is NaN).
        """
        out: list[np.ndarray | None] = [None] * len(self.panels)
        for i, p in enumerate(self.panels):
            if p["series"] is not None:
                out[i] = self._read_one(i, start, stop)
        for i, p in enumerate(self.panels):
            if p["difference_of"] is not None:
                a, b = p["difference_of"]
                out[i] = np.subtract(out[a], out[b], dtype=np.result_type(out[a], out[b],
                                                                          np.float32))
        return out

    def _read_one(self, i: int, start: int, stop: int, name: str | None = None
                  ) -> np.ndarray:
        # Panel i's field (or its file's variable `name`) for movie steps start:stop.
        s, runs = self.series[i], self.panels[i]["steps"]
        parts = []
        for m0, p0, length in runs:
            lo, hi = max(start, m0), min(stop, m0 + length)
            if lo < hi:  # this run's part of the range, read in one call
                a, b = p0 + lo - m0, p0 + hi - m0
                parts.append(s.read(a, b) if name is None else s.read_variable(name, a, b))
                if parts[-1].ndim == 2:  # a variable without time: one field for all
                    return parts[-1]
        return parts[0] if len(parts) == 1 else np.concatenate(parts)

    def iter_blocks(self, start: int, stop: int, max_bytes: int):
        """Yield ``(t0, fields)`` over ``start:stop`` in blocks of at most `max_bytes`.

        A block always holds at least one step.
        """
        per = max(1, int(max_bytes) // max(self.step_bytes(), 1))
        for t0 in range(start, stop, per):
            yield t0, self.read(t0, min(stop, t0 + per))

    def panel_view(self, i: int, n_time: int) -> _PanelView:
        """Panel `i` over the movie's `n_time` steps as the statistics pass reads a series."""
        return _PanelView(self, i, n_time)


class _PanelView:
    # What ncreel.jobs.stats.series_statistics reads: n_time, ny, nx, dtype, iter_blocks.
    def __init__(self, reader: PanelReader, i: int, n_time: int) -> None:
        self.reader, self.i, self.n_time = reader, i, n_time
        self.ny, self.nx = reader.shape(i)
        self.dtype = np.float64

    def iter_blocks(self, start: int, stop: int, max_bytes: int):
        p = self.reader.panels[self.i]
        needed = set(p["difference_of"] or [self.i])
        per = max(1, int(max_bytes) // max(8 * self.ny * self.nx * len(needed), 1))
        for t0 in range(start, stop, per):
            t1 = min(stop, t0 + per)
            if p["difference_of"] is None:
                yield t0, self.reader._read_one(self.i, t0, t1)
            else:
                a, b = (self.reader._read_one(k, t0, t1) for k in p["difference_of"])
                yield t0, np.subtract(a, b, dtype=np.result_type(a, b, np.float32))


class _OverlayView:
    # What ncreel.render.overlays reads of a series, over the movie's steps.
    def __init__(self, reader: PanelReader, i: int, n_time: int) -> None:
        self.reader, self.i, self.n_time = reader, i, n_time
        self.ny, self.nx = reader.shape(i)

    def read_variable(self, name: str, start: int, stop: int) -> np.ndarray:
        return self.reader._read_one(self.i, start, stop, name)
