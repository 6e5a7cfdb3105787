"""What the rules need from the config and the input, and every side effect of starting a run.

``workflow/rules/common.smk`` makes two calls:

- :func:`load_config` checks the config (renamed and deprecated keys, unknown keys, the
  schema and its defaults, names, colours, the map projection) and reads the input's
  header (files, sizes, time, the cell model's columns). It writes nothing.
- :func:`start_run`, in Snakemake's main process only, does what a run does before its
  first job: the input links, the config file jobs read, the run lock and the clearing
  of a killed run's stale lock.

Bad input raises :class:`ncreel.core.errors.NcreelError` with one line naming the key or file.
The package never imports Snakemake: the schema validator (``snakemake.utils.validate``,
which also fills the schema's defaults) is passed in.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from ncreel.config.settings import OUTPUTS
from ncreel.core.errors import NcreelError


@dataclass(frozen=True)
class RunConfig:
    """A checked run: the validated config and what the rules declare from it.

    Attributes
    ----------
    config : dict
        The config, upgraded and validated with the schema's defaults filled in (the
        mapping given to :func:`load_config`, changed in place as Snakemake's validation
        does).
    notes : tuple of str
        Things said once to the user (renamed keys, repeated times, undecoded time).
    run, out, logs : str
        The run's name, ``results/<run>``, ``logs/<run>``.
    table : str
        The PostgreSQL table, quoted where needed (:func:`ncreel.config.configcheck.check_names`).
    inputs : list of str
        The input files (:func:`ncreel.input.source.resolve_paths`).
    input_stamps : dict
        Which version of each input the run is planned from
        (:func:`ncreel.input.identity.input_stamps`).
    rule_inputs : list of str
        What rules declare as input: the paths, or plain-named links to them
        (:func:`ncreel.run.jobtext.input_link`; made by :func:`start_run`).
    series : dict
        :meth:`ncreel.input.source.Series.spec`: how every job reopens the series.
    grid : dict
        ``n_time``, ``ny``, ``nx`` of the movie's series (its region's cells).
    table_grid : dict
        The same for the per-cell table (the whole grid when ``region.table`` is
        ``global``).
    region : ncreel.region.spec.Region or None
        Config ``region``.
    contours, vectors : dict or None
        The overlays, with defaults filled in (:func:`ncreel.render.overlays.overlay_settings`).
        ``n_time``, ``ny``, ``nx``.
    time_dim : str
    cells : dict
        Config ``cells`` normalised (:func:`ncreel.cells.cells_settings`).
    cell_columns : list of (str, str)
        The table's columns and PostgreSQL types, declared by the cell model.
    cell_note : str
        Comment of the table: the variable, its files, and what time is missing.
    render, encode : dict
        The frame and encoder settings rules pass on.
    mid_t : int
        The run's middle frame (the preview).
    movie, copy_file, preview : str
        The run's main outputs (made or not: see `outputs`).
    outputs : tuple of str
        Config ``outputs`` in the order of :data:`OUTPUTS`: ``movie``, ``table``.
    window : (int, int, int) or None
        The steps of the whole input series shown (config ``time_range`` and
        ``time_every``; :func:`ncreel.input.timeaxis.time_window`), None: every step.
    chunk_mb : dict
        The time chunks each job's reads hold (MiB, :func:`_chunk_mb`): ``statistics``,
        ``calibrate``, ``shard`` (its rows pass) and ``prepass`` (degradation_state);
        the jobs' memory counts them (:mod:`ncreel.run.resources`).
    frame_fitted : str or None
        The key of a frame layout built now and found to fit, which :func:`start_run`
        remembers (:func:`_frame_check_key`); None when it was not built (known to fit,
        or a job's own Snakemake).
    """

    config: dict
    notes: tuple[str, ...]
    run: str
    out: str
    logs: str
    table: str
    inputs: list[str]
    input_stamps: dict
    rule_inputs: list[str]
    series: dict
    grid: dict
    table_grid: dict
    region: object
    contours: dict | None
    vectors: dict | None
    time_dim: str
    cells: dict
    cell_columns: list
    cell_note: str
    render: dict
    encode: dict
    mid_t: int
    movie: str
    copy_file: str
    preview: str
    outputs: tuple = OUTPUTS
    window: tuple | None = None
    chunk_mb: dict = dataclasses.field(default_factory=lambda: dict.fromkeys(
        ("statistics", "calibrate", "shard", "prepass"), 0.0))
    frame_fitted: str | None = None

    @property
    def movie_on(self) -> bool:
        """Whether the run makes the movie (config ``outputs``)."""
        return "movie" in self.outputs

    @property
    def table_on(self) -> bool:
        """Whether the run makes the per-cell table (config ``outputs``)."""
        return "table" in self.outputs


def _chunk_mb(series, table, cells: dict, contours, vectors, *, movie_on: bool,
              table_on: bool) -> dict:
    """Return the time chunks each job's series hold between reads, MiB, by job.

    :meth:`ncreel.input.source.Series.held_chunk_bytes` of the variables each reads: the
    statistics job the movie's (with its overlays' variables) and the table's series
    (when it is another), calibrate_render what it probes (the frames, else the rows), a
    shard's rows pass the table's variable and the cell model's interception variable,
    degradation_state the temperature variable. A shard's frames are in the calibrated
    peak.
    """
    from ncreel.cells.soil import needs_prepass
    from ncreel.render.overlays import overlay_variables

    params = cells.get("params") or {}
    overlays = [n for g in overlay_variables(contours, vectors) for n in g] if movie_on \
        else []
    extra = params.get("interception_variable") if cells.get("model") == "etr_risk" \
        else None
    movie = series.held_chunk_bytes([series.variable, *overlays])
    rows = table.held_chunk_bytes([table.variable, *([extra] if extra else [])]) \
        if table_on else 0
    mib = 2**20
    return {"statistics": (movie + (table.held_chunk_bytes() if table_on and table
                                    is not series else 0)) / mib,
            "calibrate": (movie if movie_on else rows) / mib,
            "shard": rows / mib,
            "prepass": table.held_chunk_bytes([params["temperature_variable"]]) / mib
            if table_on and needs_prepass(cells) else 0.0}


def _check_config(config: dict, overrides: Mapping, validate: Callable) -> tuple[list, str]:
    """Upgrade, check and validate `config` in place; return the notes and the table."""
    from ncreel.cells import upgrade_cells_config
    from ncreel.config.configcheck import (
        check_colours,
        check_database,
        check_names,
        coerce_cli_values,
        coerce_dates,
        load_schema,
        schema_error_message,
        schema_path,
        unknown_key_message,
        upgrade_renamed_keys,
    )

    notes = list(upgrade_renamed_keys(config))
    known = load_schema()["properties"]
    for key in config:
        if key not in known:
            raise NcreelError(unknown_key_message(key))
    # Before anything echoes config values: a password must not reach jobs or messages.
    check_database(config.get("database"))
    # Model parameters have one key, cells.params; the deprecated cells.etr is moved into
    # it before validation, so the schema checks and completes etr_risk's parameters there.
    if isinstance(config.get("cells"), dict):
        config["cells"], note = upgrade_cells_config(config["cells"])
        if note:
            notes.append(note)
    # `--config select={level: 0}` (any nested value on the command line) arrives as
    # strings; give them their YAML types ('0' -> 0, 'true' -> True) before validation.
    coerce_cli_values(config, overrides)
    coerce_dates(config)
    try:
        validate(config, str(schema_path()))
    except Exception as err:  # Snakemake's WorkflowError wrapping jsonschema's error
        cause = err.__cause__ or err.__context__
        if not hasattr(cause, "absolute_path"):
            cause = err if hasattr(err, "absolute_path") else None
        raise NcreelError(schema_error_message(cause) if cause is not None else
                          "config: does not match workflow/schemas/config.schema.yaml"
                          ) from None
    table = check_names(config)
    check_colours(config)
    from ncreel.render.maps import map_projection

    try:  # a wrong projection name or parameter stops the run before any job or file
        map_projection(config["map"]["projection"], config["map"]["projection_params"])
    except ValueError as err:
        raise NcreelError(f"config: {err}") from None
    return notes, table


def load_config(config: dict, *, overrides: Mapping | None = None,
                validate: Callable[[dict, str], object],
                mem_cap_mb: float | None = None, main: bool = True) -> RunConfig:
    """Check `config` and read the input's header: everything the rules declare.

    Parameters
    ----------
    config : dict
        The config as Snakemake loaded it (config file and ``--config``); upgraded and
        validated in place.
    overrides : mapping, optional
        The ``--config`` values as given on the command line (their nested values are
        strings until typed here).
    validate : callable
        ``validate(config, schema_path)`` checking against the schema and filling its
        defaults: ``snakemake.utils.validate``.
    mem_cap_mb : float, optional
        The largest ``mem_mb`` a job gets (``--resources mem_mb``), for the size check.
    main : bool
        Snakemake's main process (the controller, a dry run): also the checks whose
        answer a job cannot change, done once before any job -- a grid mapping against
        the file's 2-D latitude/longitude
        (:meth:`ncreel.input.source.Series.check_one_geometry`), the frame built once to see
        that every map has room (:func:`ncreel.render.segment.check_frame_fits`). False in
        a job's own Snakemake, which parses the workflow again.

    Returns
    -------
    RunConfig

    Raises
    ------
    NcreelError
        Anything wrong with the config or the input, in one line naming the key or file.
    """
    from ncreel.cells import cells_settings, series_columns
    from ncreel.cells.soil import check_run, needs_prepass
    from ncreel.config.settings import SeriesSelection
    from ncreel.input.catalog import is_catalog, select_dataset
    from ncreel.input.coordsel import resolve_sel
    from ncreel.input.identity import input_stamps
    from ncreel.input.inputcheck import check_input_sizes, check_time_steps
    from ncreel.input.source import open_series, resolve_paths
    from ncreel.input.timeaxis import time_window
    from ncreel.region.selection import open_selection, table_series
    from ncreel.region.spec import GLOBAL, region_from_config, table_region_from_config
    from ncreel.render.overlays import check_overlays, overlay_settings
    from ncreel.render.panelplan import plan_panels
    from ncreel.render.timelabels import check_time_format, series_labels, time_format_note
    from ncreel.run.jobtext import input_link
    from ncreel.run.resources import check_series_size

    notes, table = _check_config(config, overrides or {}, validate)
    if config["time_format"] is not None:  # a code it cannot format: before the input
        check_time_format(config["time_format"])
    run = config["run"]
    out = f"results/{run}"
    catalog = None
    if is_catalog(config["input"]):  # the assets of the query's one dataset, in join order
        catalog = select_dataset(config["input"], config["variable"],
                                 cache_dir=os.path.join(".snakemake", "ncreel", "catalogs"))
        notes.append(f"input: catalog '{catalog.catalog}', dataset {catalog.key}: "
                     f"{len(catalog.paths)} asset(s)")
    inputs = resolve_paths(list(catalog.paths) if catalog else config["input"])
    stamps = input_stamps(inputs)
    check_input_sizes(inputs)
    check_time_steps(inputs, config["variable"], config["time_dim"])
    outputs = tuple(o for o in OUTPUTS if o in config["outputs"])
    movie_on, table_on = "movie" in outputs, "table" in outputs
    # A bad region (unknown country, empty box, a grid it cannot cut) stops here.
    region = region_from_config(config["region"])
    # cells.region is checked whatever the outputs (a wrong value never passes silently),
    # and used only for a table.
    table_region = table_region_from_config(config["cells"].get("region"))
    if not table_on and config["cells"].get("region") is not None:
        notes.append("cells.region is the table's extent and outputs has no table: not used")
        table_region = None
    if table_region == GLOBAL:  # every cell: the movie's region says so, as it always did
        table_region = None
        if region is not None:
            region = dataclasses.replace(region, table="global")
    # Levels by coordinate value (sel) become indices (select) here, once.
    select = resolve_sel(inputs[0], config["variable"], config["sel"], config["select"],
                         time_dim=config["time_dim"])
    selection = SeriesSelection(paths=inputs, variable=config["variable"],
                                time_dim=config["time_dim"], select=select,
                                lat=config["lat"], lon=config["lon"], time=config["time"],
                                region=None if region is None else region.to_params(),
                                table_region=None if table_region is None
                                else table_region.to_params())
    window, window_note = None, ""
    if config["time_range"] is not None or config["time_every"] != 1:
        # The steps shown, from the whole series' time axis (read once; the files' order
        # and repeated times as decided here are passed on, not decided again).
        with open_series(selection.paths, selection.variable, time_dim=selection.time_dim,
                         select=select, lat=selection.lat, lon=selection.lon,
                         time=selection.time) as whole:
            axis = whole.time_axis()
            window = time_window(axis, config["time_range"], config["time_every"],
                                 variable=whole.variable)
            if window is not None:
                shown = axis.labels[slice(*window)]
                window_note = (
                    f"showing {len(range(*window))} of {whole.n_input} steps of "
                    f"'{whole.variable}' (time_range {config['time_range'] or 'all'}, "
                    f"time_every {config['time_every']}): {shown[0] or window[0]} .. "
                    f"{shown[-1] or window[1] - 1}"
                    + ("; the table's time_index keeps each step's index in the whole "
                       "series" if table_on else ""))
            spec = whole.spec()
            selection = dataclasses.replace(selection, paths=spec["paths"],
                                            steps=spec["steps"], window=window)
    if window_note:
        notes.append(window_note)
    with open_selection(selection) as series, table_series(selection, series) as whole:
        if catalog is not None and catalog.join_dim not in (None, series.time_dim):
            raise NcreelError(
                f"config key 'input.catalog': catalog '{catalog.catalog}' joins its assets "
                f"along '{catalog.join_dim}', and the time dimension of "
                f"'{series.variable}' is '{series.time_dim}': ncreel joins files along "
                f"time; set time_dim: {catalog.join_dim} if that is the time axis")
        if main:  # centres and polygons from one geometry: a mapping against 2-D lat/lon
            whole.check_one_geometry()
        grid = {"n_time": series.n_time, "ny": series.ny, "nx": series.nx}
        # The table's grid: the statistics pass holds its per-cell sums.
        table_grid = ({"n_time": whole.n_time, "ny": whole.ny, "nx": whole.nx}
                      if table_on else dict(grid))
        check_series_size(**table_grid, variable=series.variable, mem_cap_mb=mem_cap_mb)
        cells = cells_settings(config["cells"])
        # The table's columns, declared by the cell model (imported here, so a bad
        # cells.model stops the run before any job starts). None without a table.
        columns = series_columns(whole, cells) if table_on else []
        if table_on and cells["layout"] == "normalised":
            # A model without cell_id/time_index, or a table name too long for
            # <table>_values, stops here.
            from ncreel.pg.layout import MAX_CELLS, layout_tables, split_columns

            split_columns(columns)
            layout_tables(table)
            if whole.ny * whole.nx > MAX_CELLS:
                raise NcreelError(
                    f"config key 'cells.layout': normalised numbers cells with PostgreSQL "
                    f"integer ids (at most {MAX_CELLS}), and {series.variable} has "
                    f"{whole.ny * whole.nx} cells: set cells.layout: wide, or cut the grid "
                    "with region")
        # etr_risk's time course: dates, temperature variable and units, before any job.
        if table_on:
            check_run(whole, cells)
            if needs_prepass(cells) and window is not None and window[2] > 1:
                notes.append(f"etr_risk's degradation follows the temperature of the steps "
                             f"shown: with time_every {window[2]} each one's temperature "
                             f"holds for {window[2]} steps of the file")
        # Overlays' variables exist on the movie's grid (u with v: the schema).
        contours, vectors = overlay_settings(config["contours"], config["vectors"])
        if movie_on:
            check_overlays(series, contours, vectors)
        chunk_mb = _chunk_mb(series, whole, cells, contours, vectors, movie_on=movie_on,
                             table_on=table_on)
        # Panels: every panel's variable, grid, time steps and overlays, before any job.
        # Panels match their files' steps by the automatic labels, whatever time_format
        # shows. A run without a movie draws none of them.
        panels = plan_panels(config["panels"], config=config, selection=selection,
                             movie_labels=series_labels(series), movie_paths=series.paths,
                             width=config["width"], height=config["height"],
                             columns=config["panel_columns"]) if movie_on else None
        if config["decorate"] and movie_on:  # imported and called once on a probe figure
            from ncreel.config.settings import RenderSettings
            from ncreel.render.decorate import check_decorate
            from ncreel.render.segment import map_settings, plot_axes

            probe = RenderSettings.from_params(
                {k: config[k] for k in ("width", "height", "dpi", "cmap", "map")})
            x, y, _, _ = plot_axes(series)
            geo = series.has_lat_lon
            projection, _ = map_settings(probe.map, lon=x if geo else None,
                                         lat=y if geo else None)
            check_decorate(config["decorate"], series, probe, projection=projection, x=x,
                           y=y, panels=len(config["panels"] or ()))
        time = series.time_axis()
        if config["time_format"] is not None:  # different dates shown alike: said, run
            note = time_format_note(series_labels(series, config["time_format"]),
                                    time.labels, config["time_format"])
            if note:
                notes.append(note)
        cell_note = f"'{series.variable}' from {', '.join(series.paths)}"
        if time.note:
            cell_note += (f"\ntime could not be decoded ({time.note}); column time is NULL"
                          if not time.decoded else
                          f"\ntime not decoded for some steps ({time.note}); column time is "
                          "NULL there")
        if series.note:  # repeated times dropped
            notes.append(series.note)
        if time.note:
            notes.append(f"{time.note}; column time is NULL there")
        # Reopened by every job exactly as detected here (files in time order).
        spec, time_dim = series.spec(), series.time_dim
        if selection.table_region is not None:
            spec["table_region"] = selection.table_region
    if panels:  # the panels' own files are inputs of the run too
        inputs = [*inputs, *dict.fromkeys(
            q for p in panels["panels"] if p["series"] for q in p["series"]["paths"]
            if q not in inputs)]
        stamps = input_stamps(inputs)
    # What rules declare as input: a path with any but plain characters (a quote, `$`,
    # braces Snakemake would read as a wildcard) as a plain-named link to it; jobs open
    # the real paths from `series` (params, which never pass through a shell).
    rule_inputs = [input_link(p, create=False) for p in inputs]
    render = {k: config[k] for k in ("width", "height", "dpi", "cmap", "map")}
    # Overlays, caption and colour-bar arrows only when set: the params of runs without
    # them stay as they were (no rerun).
    render.update({k: v for k, v in (("contours", contours), ("vectors", vectors)) if v})
    if panels:
        render["panels"] = panels
    if config["caption"]:
        render["caption"] = config["caption"]
    if config["time_format"] is not None:  # in params: a changed format re-renders
        render["time_format"] = config["time_format"]
    if config["colorbar_extend"] != "auto":
        render["colorbar_extend"] = config["colorbar_extend"]
    if config["decorate"]:  # with its module's digest: an edited function reruns frames
        from ncreel.render.decorate import decorate_params

        render["decorate"] = decorate_params(config["decorate"])
    frame_fitted = None
    # Maps the layout leaves no room: one line now, not calibrate_render's error (once per
    # layout and inputs: a later command of the same run knows it fits).
    if main and not _frame_check_path(key := _frame_check_key(spec, render, config,
                                                               stamps)).exists():
        _check_frame(spec, render, config)
        frame_fitted = key
    return RunConfig(
        frame_fitted=frame_fitted,
        outputs=outputs, window=window, chunk_mb=chunk_mb,
        config=config, notes=tuple(notes), run=run, out=out, logs=f"logs/{run}",
        table=table, inputs=inputs, input_stamps=stamps, rule_inputs=rule_inputs,
        series=spec, grid=grid, table_grid=table_grid, region=region, contours=contours,
        vectors=vectors, time_dim=time_dim, cells=cells, cell_columns=columns,
        cell_note=cell_note, render=render,
        encode={k: config[k] for k in ("fps", "crf", "preset")},
        mid_t=grid["n_time"] // 2, movie=f"{out}/movie.mp4",
        copy_file=f"{out}/cells{cells['suffix']}", preview=f"{out}/preview.png")


#: Where a frame layout that fitted is remembered (:func:`_frame_check_key`, :func:`start_run`).
FRAME_CHECK_DIR = os.path.join(".snakemake", "ncreel", "frame-fits")


def _frame_check_key(spec: dict, render: dict, config: Mapping, stamps: dict) -> str:
    """Return what :func:`_check_frame`'s answer depends on, as a SHA-256 hex digest.

    Building the frame is most of a dry run's time (matplotlib, cartopy), so a layout that
    fitted is remembered (:func:`start_run`) and a later ``snakemake`` command of the same
    run (a resume, a dry run, ``--report``) skips it. The key holds the series, the
    render settings, the configured colour limits, the inputs' size and modification time
    and the renderer's own source files and libraries (an upgraded ncreel, matplotlib or
    cartopy checks again).
    """
    import hashlib
    import json
    from importlib.metadata import version
    from pathlib import Path

    import ncreel.render

    code = sorted((p.name, p.stat().st_size, p.stat().st_mtime_ns)
                  for p in Path(ncreel.render.__file__).parent.glob("*.py"))
    code += [version("matplotlib"), version("cartopy")]  # they lay the frame out
    return hashlib.sha256(json.dumps(
        [spec, render, config["vmin"], config["vmax"], stamps, code], sort_keys=True,
        default=str).encode()).hexdigest()


def _frame_check_path(key: str, workdir: str | os.PathLike = "."):
    from pathlib import Path

    return Path(workdir) / FRAME_CHECK_DIR / key


def _check_frame(spec: dict, render: dict, config: Mapping) -> None:
    """:func:`ncreel.render.segment.check_frame_fits` with colour limits like the run's.

    The statistics job's limits are not known yet: those of the first step (2nd and 98th
    percentiles, or the configured ones; each panel's as
    :func:`ncreel.jobs.stats.panel_statistics` takes them) give tick labels of the same
    width.
    """
    import numpy as np

    from ncreel.config.settings import RenderSettings, SeriesSelection
    from ncreel.jobs.stats import nonsingular_range, panel_statistics
    from ncreel.region.selection import open_selection
    from ncreel.render.segment import check_frame_fits

    settings = RenderSettings.from_params(render)
    with open_selection(SeriesSelection.from_params(spec)) as series:
        try:
            field = series.read(0, 1)
            panels = panel_statistics(settings.panels, 1) if settings.panels else None
        except NcreelError:  # a corrupt first step: the statistics job names it
            field = np.empty(0)
            panels = [{"vmin": 0.0, "vmax": 1.0}] * len(settings.panels["panels"]) \
                if settings.panels else None
        finite = field[np.isfinite(field)]
        lo, hi = (float(v) for v in np.percentile(finite, [2.0, 98.0])) if finite.size \
            else (0.0, 1.0)
        lo = lo if config["vmin"] is None else float(config["vmin"])
        hi = hi if config["vmax"] is None else float(config["vmax"])
        lo, hi = nonsingular_range(*sorted((lo, hi)))
        check_frame_fits(series, settings, vmin=lo, vmax=hi, panel_limits=panels)


def start_run(run: RunConfig, config_settings, workdir: str | os.PathLike = ".") -> str:
    """Every side effect of starting `run`, in Snakemake's main process, before the DAG.

    In order: the plain-named links to inputs whose paths are not plain
    (:func:`ncreel.run.jobtext.input_link`); the file the jobs read the ``--config`` values
    from (:func:`ncreel.run.jobtext.pass_config_by_file`: no config value on a job's shell
    command line); the run lock (one run at a time per run, whatever happens to
    Snakemake's own locks; dry runs, ``--unlock`` and ``--report`` of a running run are
    refused too); the mark of a frame layout found to fit (``run.frame_fitted``, under
    :data:`FRAME_CHECK_DIR`); removing the Snakemake lock a killed run left, only when that run is
    certainly dead, so that the same command resumes -- only its own, when another run
    is live in the same directory. (The killed run's scheduler jobs are cancelled in
    ``workflow/rules/scheduler.smk``.)

    Parameters
    ----------
    run : RunConfig
        From :func:`load_config`.
    config_settings : snakemake.settings.types.ConfigSettings
        ``workflow.config_settings``; changed in place (see ``pass_config_by_file``).
    workdir : str or os.PathLike
        Snakemake's working directory.

    Returns
    -------
    str
        What of a killed run's stale lock was removed (false: nothing; see
        :func:`ncreel.cluster.runlock.clear_stale_lock`).

    Raises
    ------
    NcreelError
        Another run of the same name is running, a link cannot be made, or the lock of a
        killed run cannot be cleared safely.
    """
    from ncreel.cluster.runlock import clear_stale_lock, hold_run_lock
    from ncreel.run.jobtext import input_link, pass_config_by_file

    for path in run.inputs:
        input_link(path, create=True)
    # Jobs get the --config values as checked here (typed, see coerce_cli_values), so they
    # read them as given in a config file and convert nothing.
    if config_settings.config:
        config_settings.config = {k: run.config[k] for k in config_settings.config
                                  if k in run.config}
    pass_config_by_file(config_settings)
    hold_run_lock(f"{run.out}/.ncreel-run.lock", run.run, places={run.logs: "log directory"})
    if run.frame_fitted:  # the next command of this run need not build the frame again
        marker = _frame_check_path(run.frame_fitted, workdir)
        try:
            marker.parent.mkdir(parents=True, exist_ok=True)
            marker.touch()
        except OSError:  # a read-only .snakemake: the next command checks again
            pass
    return clear_stale_lock(workdir, run_dirs=(run.out, run.logs))
