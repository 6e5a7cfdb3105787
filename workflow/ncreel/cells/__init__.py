"""Per-cell result rows: cell models, their column contract, and cell geometry.

A *cell model* turns one block of the series, shape ``(time, y, x)``, into typed columns:
one row per (time step, grid cell) it chooses to report. It is a plain function

``model(block, t0, ctx, **params) -> dict[str, array]``

carrying a ``columns`` attribute

``model.columns(ctx, **params) -> list[tuple[str, str]]``

that declares the returned columns' names and PostgreSQL types, in table order (the
decorator :func:`cell_model` attaches it). ``columns`` must not depend on the data: the
reduce rule calls it once, at workflow parse time, to write the table's DDL.

Built in: ``field`` (:func:`field_model`, the default: value and anomaly of each cell)
and ``etr_risk`` (:func:`etr_risk_model`, the environmental-risk model of the original
per-cell job). Users name their own as ``package.module:function``
(config ``cells.model``); :func:`resolve_model` imports it and :func:`check_columns`
validates every block's output against the declaration, naming model and column on error.

This package owns the cell models and what they produce; :mod:`.soil` is the soil fate
behind ``etr_risk``. May import: the standard library, numpy, cftime, polars,
:mod:`ncreel.source`, :mod:`ncreel.errors`, :mod:`ncreel.io` and :mod:`ncreel.pg` (to
encode rows as COPY text). Not the render code, the report or the cluster code.
"""

from __future__ import annotations

import importlib
import logging
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from ncreel.errors import NcreelError
from ncreel.pg.types import GEOMETRY_TYPES, value_type
from ncreel.source import TimeAxis, wrap_longitude

#: Column name the load step adds to every table (the run's name); models may not use it.
RUN_COLUMN = "run"
#: Name of the optional polygon column appended when ``cells.geometry`` is not ``none``.
GEOMETRY_COLUMN = "geom"
#: Risk classes of :func:`etr_risk_model`, lowest first (one more than thresholds).
RISK_CLASSES = ("very low", "low", "medium", "high")


@dataclass(frozen=True)
class CellContext:
    """What a cell model may use besides the block itself.

    Attributes
    ----------
    time : TimeAxis
        The whole series' time axis (index it with global time indices).
    cell_mean : numpy.ndarray, shape (ny, nx), float64
        Mean of each cell over the whole series (NaN if never finite). Empty, shape (0,),
        when ``columns`` is called at parse time.
    lat, lon : numpy.ndarray, shape (ny, nx), float64, degrees; or None
        Cell-centre coordinates when the grid has them.
    value_type : str
        PostgreSQL type of the variable's values (``real`` or ``double precision``).
    variable : str
        Name of the series' data variable.
    read_variable : callable or None
        ``read_variable(name, start, stop)`` returns another variable of the same files
        for global time steps ``start:stop`` as float, shape ``(stop - start, ny, nx)``
        (or ``(ny, nx)`` if it has no time dimension), NaN where missing. None at parse time.
    state : dict
        Pre-pass results by name, and a per-shard cache of the model.
    """

    time: TimeAxis
    cell_mean: np.ndarray
    lat: np.ndarray | None
    lon: np.ndarray | None
    value_type: str = "real"
    variable: str = ""
    read_variable: Callable[[str, int, int], np.ndarray] | None = field(default=None,
                                                                        repr=False)
    #: Per-run inputs from pre-passes (e.g. ``degradation``: the soil degradation state
    #: of :func:`ncreel.cells.soil.degradation_prepass`), and a cache a model may fill while it
    #: is called on a shard's blocks in order.
    state: dict = field(default_factory=dict, repr=False)


def cell_model(*, columns: Callable[..., Sequence[tuple[str, str]]]):
    """Decorate a cell-model function with its column declaration.

    Parameters
    ----------
    columns : callable
        ``columns(ctx, **params) -> [(name, pgtype), ...]``.

    Returns
    -------
    callable
        Decorator returning the function itself with ``columns`` attached.
    """
    def wrap(fn):
        fn.columns = columns
        return fn
    return wrap


def _present_rows(block: np.ndarray, t0: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Local time index, flat cell index and value of every non-missing cell of `block`.

    NaN is missing (``_FillValue``/``missing_value`` decode to it) and gives no row;
    ``±inf`` is a value and is kept (COPY writes it as ``inf``/``-inf``).
    """
    n_t, ny, nx = block.shape
    flat = block.reshape(n_t, ny * nx)
    t_local, cell = np.nonzero(~np.isnan(flat))
    return t_local, cell, flat[t_local, cell]


def _time_column(ctx: CellContext, t0: int, n_t: int, t_local: np.ndarray):
    """``time`` column: one label per step, gathered per row without Python objects."""
    import polars as pl

    if not ctx.time.decoded:
        return pl.Series("time", [None], dtype=pl.Utf8).gather(np.zeros(len(t_local), np.int64))
    return pl.Series("time", ctx.time.labels[t0:t0 + n_t], dtype=pl.Utf8).gather(t_local)


def _position(ctx: CellContext, cell: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    lat = ctx.lat.reshape(-1)[cell] if ctx.lat is not None else np.full(len(cell), np.nan)
    lon = ctx.lon.reshape(-1)[cell] if ctx.lon is not None else np.full(len(cell), np.nan)
    return lat, lon


def field_columns(ctx: CellContext) -> list[tuple[str, str]]:
    """Column names and PostgreSQL types written by :func:`field_model`, in order."""
    return [
        ("time_index", "integer"),
        ("time", ctx.time.postgres_type),
        ("time_value", "double precision"),
        ("cell_id", "bigint"),
        ("lat", "double precision"),
        ("lon", "double precision"),
        ("value", ctx.value_type),
        ("anomaly", "double precision"),
    ]


@cell_model(columns=field_columns)
def field_model(block: np.ndarray, t0: int, ctx: CellContext) -> dict[str, object]:
    """Compute the default ``field`` model: value and anomaly of each non-missing cell and step.

    Parameters
    ----------
    block : numpy.ndarray, shape (n_t, ny, nx)
        Values for global time indices ``t0 : t0 + n_t``, NaN where missing.
    t0 : int
        Global index of the block's first time step.
    ctx : CellContext
        Series-wide context.

    Returns
    -------
    dict of str to array, each of length n_rows
        Columns of :func:`field_columns`, rows ordered by time then ``cell_id``
        (row-major ``iy * nx + ix``). ``anomaly = value - cell_mean`` (float64).
        Cells whose value is NaN (``_FillValue``/``missing_value``) give no row; ``±inf``
        values give rows (their anomaly is ``±inf``).
    """
    t_local, cell, value = _present_rows(block, t0)
    t_global = t_local + t0
    lat, lon = _position(ctx, cell)
    return {
        "time_index": t_global.astype(np.int32),
        "time": _time_column(ctx, t0, block.shape[0], t_local),
        "time_value": ctx.time.values[t_global],
        "cell_id": cell.astype(np.int64),
        "lat": lat,
        "lon": lon,
        "value": value,
        "anomaly": value.astype(np.float64) - ctx.cell_mean.reshape(-1)[cell],
    }


#: Defaults of the ``etr_risk`` parameters (config ``cells.etr``); see :func:`etr_risk_model`.
ETR_DEFAULTS = {
    "application_rate_g_ha": 1000.0,
    "correction_factor": 1.0,
    "assumed_depth_m": 0.05,
    "soil_density_kg_m3": 1500.0,
    "ec50_mg_kg": 10.0,
    "thresholds": [0.01, 0.1, 1.0],
    "interception_variable": None,
    "interception_percent": 0.0,
    # Time course after application(s) (ncreel.cells.soil); off without applications.
    "applications": [],
    "first_application": None,
    "application_number": 1,
    "application_interval_days": 0.0,
    "dt50_days": None,
    "twa_windows_days": [7, 21, 28, 50, 100],
    "long_term_twa_days": 21,
    "noec_mg_kg": 1.0,
    "trigger_etr_acute": 0.1,
    "trigger_etr_long_term": 0.2,
    "plateau_years": None,
    "tillage_depth_m": 0.20,
    "year_days": 365.0,
    "temperature_variable": None,
    "temperature_units": "K",
    "ea_kj_mol": 65.4,
    "reference_temperature_c": 20.0,
}


def etr_columns(ctx: CellContext, **params) -> list[tuple[str, str]]:
    """Column names and PostgreSQL types written by :func:`etr_risk_model`, in order.

    With applications configured, :func:`ncreel.cells.soil.time_course_columns` follow.
    """
    from ncreel.cells import soil

    p = {**ETR_DEFAULTS, **params}
    extra = soil.time_course_columns(ctx.time.postgres_type, p) \
        if soil.time_course_enabled(p) else []
    return [
        ("time_index", "integer"),
        ("time", ctx.time.postgres_type),
        ("cell_id", "bigint"),
        ("lat", "double precision"),
        ("lon", "double precision"),
        ("interception_percent", "double precision"),
        ("pec_soil_mg_kg", "double precision"),
        ("etr", "double precision"),
        ("risk_class", "text"),
        *extra,
    ]


def pec_soil(*, application_rate_g_ha, interception_percent, correction_factor,
             assumed_depth_m, soil_density_kg_m3):
    """Predicted environmental concentration in soil right after application, mg/kg.

    ``PEC = AR × (1 − I/100) × CF / (d × ρ × 10⁶) × 10⁵``, i.e.
    ``AR × (1 − I/100) × CF / (10 × d × ρ)``.

    This is the initial PEC_soil of FOCUS (1997), *Soil persistence models and EU
    registration*, and of EFSA (2017), *EFSA Guidance Document for predicting environmental
    concentrations of active substances of plant protection products and transformation
    products of these active substances in soil* (EFSA Journal 15(10):4982), written there
    as ``PEC = AR (1 − f_int) / (100 × d[cm] × ρ[g/cm³])`` with AR in g/ha. In SI-style
    units: AR [g/ha] × 10³ mg/g spread over 10⁴ m²/ha into a soil layer of d [m] × ρ
    [kg/m³] kg/m² gives ``AR × 10³ / (10⁴ × d × ρ) = AR / (10 d ρ)`` mg/kg.

    The issue that specified ncreel writes the denominator as ``d × ρ × 10⁶``. That
    constant is dimensionally consistent only for AR in kg/m² (or for PEC as a mass fraction,
    kg/kg, with AR in mg/m²), neither a unit anyone states application rates in; for the
    units documented here the consistent constant is 10, which reproduces the textbook
    value 1.333 mg/kg for 1 kg/ha in 5 cm of soil at 1.5 g/cm³.

    Parameters
    ----------
    application_rate_g_ha : float or numpy.ndarray
        Application rate AR, g active substance per hectare.
    interception_percent : float or numpy.ndarray
        Crop interception I, percent (0–100) of AR intercepted by the canopy.
    correction_factor : float
        Dimensionless multiplier CF (e.g. number of applications × accumulation).
    assumed_depth_m : float
        Soil layer depth d the substance mixes into, metres (0.05 in FOCUS).
    soil_density_kg_m3 : float
        Dry bulk density ρ of that layer, kg/m³ (1500 in FOCUS).

    Returns
    -------
    float or numpy.ndarray, float64
        PEC_soil in mg per kg dry soil, broadcast over the array arguments.
    """
    return (np.asarray(application_rate_g_ha, dtype=np.float64)
            * (1.0 - np.asarray(interception_percent, dtype=np.float64) / 100.0)
            * correction_factor / (10.0 * assumed_depth_m * soil_density_kg_m3))


def risk_level(etr: np.ndarray, thresholds: Sequence[float]) -> np.ndarray:
    """Index into :data:`RISK_CLASSES` of each ETR, -1 where ETR is NaN.

    Parameters
    ----------
    etr : numpy.ndarray, shape (n,)
        Exposure/toxicity ratios.
    thresholds : sequence of 3 float, increasing
        ``ETR < t[0]`` is very low, ``t[0] <= ETR < t[1]`` low, ``t[1] <= ETR < t[2]``
        medium, ``ETR >= t[2]`` high.

    Returns
    -------
    numpy.ndarray, shape (n,), int8
    """
    level = np.searchsorted(np.asarray(thresholds, dtype=np.float64), etr, side="right")
    level = level.astype(np.int8)
    level[np.isnan(etr)] = -1
    return level


def _check_etr(params: Mapping) -> None:
    from ncreel.cells import soil

    unknown = sorted(set(params) - set(ETR_DEFAULTS))
    if unknown:
        raise NcreelError(f"config key 'cells.etr': unknown setting(s) {', '.join(unknown)} "
                          f"(known: {', '.join(ETR_DEFAULTS)})")
    if soil.time_course_enabled(params):
        soil.check_time_course(params)
    t = list(params["thresholds"])
    if len(t) != len(RISK_CLASSES) - 1 or any(b <= a for a, b in zip(t, t[1:], strict=False)):
        raise NcreelError(f"config key 'cells.etr.thresholds': need {len(RISK_CLASSES) - 1} "
                          f"increasing ETR thresholds (very low|low|medium|high), got {t}")
    for key in ("assumed_depth_m", "soil_density_kg_m3", "ec50_mg_kg"):
        if not params[key] > 0:
            raise NcreelError(f"config key 'cells.etr.{key}': must be > 0, got {params[key]}")


@cell_model(columns=etr_columns)
def etr_risk_model(block: np.ndarray, t0: int, ctx: CellContext, **params) -> dict[str, object]:
    """Compute the ``etr_risk`` model: soil PEC, exposure/toxicity ratio and risk class per cell.

    For each non-NaN cell of `block` (the series' variable decides which cells and steps
    exist):

    - ``pec_soil_mg_kg`` = :func:`pec_soil` (AR, I, CF, d, ρ), mg/kg dry soil;
    - ``etr = PEC / EC50`` (dimensionless; EC50 in mg/kg dry soil);
    - ``risk_class`` from the thresholds, see :func:`risk_level`;
    - with ``applications`` (or ``first_application``): the time course after them,
      :func:`ncreel.cells.soil.time_course` (PEC actual and TWA in mg/kg under first-order
      decay, optionally Arrhenius-corrected by a temperature variable, the season's
      maximum and its time, the plateau, and acute/long-term ETRs with their triggers).

    The interception I (percent) is the variable named ``interception_variable`` in the
    same files at the same step and cell (it may be the series' own variable, or a
    time-invariant ``(y, x)`` field); when that is null, the constant
    ``interception_percent``. Where I is NaN, PEC, ETR and class are NULL. I outside
    0–100 is used as given (a dataset error shows up as a negative PEC, not hidden).

    Parameters
    ----------
    block : numpy.ndarray, shape (n_t, ny, nx)
        Values for global time indices ``t0 : t0 + n_t``, NaN where missing.
    t0 : int
        Global index of the block's first time step.
    ctx : CellContext
        Series-wide context; ``ctx.read_variable`` reads the interception variable.
    **params
        ``application_rate_g_ha``, ``correction_factor``, ``assumed_depth_m``,
        ``soil_density_kg_m3``, ``ec50_mg_kg``, ``thresholds``,
        ``interception_variable``, ``interception_percent``, and the time-course
        settings (README.md, "etr_risk: time course after application"); defaults in
        :data:`ETR_DEFAULTS`. Interception for an application is taken at the step in
        which the application falls.

    Returns
    -------
    dict of str to array, each of length n_rows
        Columns of :func:`etr_columns`, rows ordered by time then ``cell_id``.

    Raises
    ------
    NcreelError
        Thresholds not 3 increasing numbers, a non-positive depth/density/EC50, or an
        interception variable that cannot be read.
    """
    import polars as pl

    p = {**ETR_DEFAULTS, **params}
    _check_etr(p)
    n_t = block.shape[0]
    t_local, cell, _ = _present_rows(block, t0)
    name = p["interception_variable"]
    if name is None:
        interception = np.full(len(cell), float(p["interception_percent"]))
    else:
        if name == ctx.variable:
            field_i = block
        elif ctx.read_variable is None:
            raise NcreelError("cell model 'etr_risk': no reader for interception variable "
                              f"'{name}' in this context")
        else:
            field_i = ctx.read_variable(name, t0, t0 + n_t)
        flat = np.asarray(field_i, dtype=np.float64).reshape(-1 if field_i.ndim == 3 else 1,
                                                             block.shape[1] * block.shape[2])
        interception = flat[t_local, cell] if flat.shape[0] == n_t else flat[0, cell]
    pec = pec_soil(application_rate_g_ha=p["application_rate_g_ha"],
                   interception_percent=interception,
                   correction_factor=p["correction_factor"], assumed_depth_m=p["assumed_depth_m"],
                   soil_density_kg_m3=p["soil_density_kg_m3"])
    etr = pec / p["ec50_mg_kg"]
    level = risk_level(etr, p["thresholds"])
    classes = pl.Series("risk_class", [*RISK_CLASSES, None], dtype=pl.Utf8)
    lat, lon = _position(ctx, cell)
    extra = _etr_time_course(p, block, t0, ctx, t_local, cell)
    return {
        "time_index": (t_local + t0).astype(np.int32),
        "time": _time_column(ctx, t0, n_t, t_local),
        "cell_id": cell.astype(np.int64),
        "lat": lat,
        "lon": lon,
        "interception_percent": interception,
        "pec_soil_mg_kg": pec,
        "etr": etr,
        # level -1 (NaN ETR) indexes the trailing None: NULL class.
        "risk_class": classes.gather(np.where(level < 0, len(RISK_CLASSES), level)),
        **extra,
    }


def _etr_time_course(p: Mapping, block: np.ndarray, t0: int, ctx: CellContext,
                     t_local: np.ndarray, cell: np.ndarray) -> dict:
    """:func:`ncreel.cells.soil.time_course` columns, or none without applications."""
    from ncreel.cells import soil

    if not soil.time_course_enabled(p):
        return {}
    n_cells = block.shape[1] * block.shape[2]
    # Set up once per shard (the same ctx serves all its blocks) and per parameter set.
    key = repr(sorted(p.items()))
    cached = ctx.state.get("etr_time_course")
    if cached is None or cached[0] != key:
        clock = soil.build_clock(p, ctx.time, read_variable=ctx.read_variable,
                                 n_cells=n_cells, state=ctx.state.get("degradation"))
        apps = soil.applications(p, ctx.time.calendar)
        steps = np.searchsorted(clock.days, clock.app_days, side="right") - 1
        name = p["interception_variable"]
        pec0 = []
        for (_, rate, _), step in zip(apps, steps, strict=True):
            if name is None:
                icpt = np.array([float(p["interception_percent"])])
            elif ctx.read_variable is None:
                raise NcreelError("cell model 'etr_risk': no reader for interception "
                                  f"variable '{name}' in this context")
            else:
                icpt = np.asarray(ctx.read_variable(name, int(step), int(step) + 1),
                                  dtype=np.float64).reshape(-1)
            pec0.append(pec_soil(application_rate_g_ha=rate, interception_percent=icpt,
                                 correction_factor=p["correction_factor"],
                                 assumed_depth_m=p["assumed_depth_m"],
                                 soil_density_kg_m3=p["soil_density_kg_m3"]))
        width = max(len(x) for x in pec0)
        pec0 = np.stack([np.broadcast_to(x, (width,)) for x in pec0])
        cached = ctx.state["etr_time_course"] = (key, clock, pec0, [a[2] for a in apps])
    _, clock, pec0, labels = cached
    return soil.time_course(p=p, clock=clock, pec0=pec0, t0=t0, n_t=block.shape[0],
                            t_local=t_local, cell=cell, app_labels=labels)


#: Built-in models by their config name.
BUILTIN_MODELS = {"field": field_model, "etr_risk": etr_risk_model}


@dataclass(frozen=True)
class ResolvedModel:
    """A cell model with its name and parameters bound.

    Attributes
    ----------
    name : str
        Config name (``field``, ``etr_risk`` or ``package.module:function``).
    fn : callable
        The model function.
    params : dict
        Keyword arguments passed to both ``fn`` and ``fn.columns``.
    """

    name: str
    fn: Callable
    params: dict

    def columns(self, ctx: CellContext) -> list[tuple[str, str]]:
        """Return the declared ``(name, pgtype)`` columns, validated (:func:`check_declaration`)."""
        try:
            declared = self.fn.columns(ctx, **self.params)
        except NcreelError:
            raise
        except Exception as err:
            raise NcreelError(f"cell model '{self.name}': columns() failed: "
                              f"{type(err).__name__}: {err}") from err
        return check_declaration(self.name, declared)

    def __call__(self, block: np.ndarray, t0: int, ctx: CellContext) -> dict[str, object]:
        """Run the model on one block; the output is *not* yet checked."""
        return self.fn(block, t0, ctx, **self.params)


def resolve_model(name: str, params: Mapping | None = None) -> ResolvedModel:
    """Find a cell model by config name.

    Parameters
    ----------
    name : str
        ``field``, ``etr_risk``, or ``package.module:function`` for a user model. The
        module is imported normally; if that fails, once more with the current working
        directory (the Snakemake working directory) on ``sys.path``.
    params : mapping, optional
        Keyword arguments for the model (``cells.etr`` for ``etr_risk``, ``cells.params``
        for a user model).

    Returns
    -------
    ResolvedModel

    Raises
    ------
    NcreelError
        Unknown built-in name, a module or attribute that cannot be imported, or an object
        that is not a callable with a callable ``columns`` attribute.
    """
    params = dict(params or {})
    if name in BUILTIN_MODELS:
        return ResolvedModel(name, BUILTIN_MODELS[name], params)
    if ":" not in name:
        raise NcreelError(f"config key 'cells.model': unknown model '{name}' (built in: "
                          f"{', '.join(BUILTIN_MODELS)}; or package.module:function)")
    module_name, _, attr = name.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as first:
        cwd = os.getcwd()
        if cwd in sys.path:
            raise NcreelError(f"config key 'cells.model': cannot import '{module_name}' "
                              f"({first})") from first
        sys.path.append(cwd)
        try:
            module = importlib.import_module(module_name)
        except ImportError as err:
            raise NcreelError(f"config key 'cells.model': cannot import '{module_name}' "
                              f"({err})") from err
    fn = module
    for part in attr.split("."):
        fn = getattr(fn, part, None)
    if not callable(fn) or not callable(getattr(fn, "columns", None)):
        raise NcreelError(
            f"config key 'cells.model': '{name}' must be a function "
            "model(block, t0, ctx, **params) -> dict with a columns(ctx, **params) -> "
            "[(name, pgtype), ...] attribute (use the ncreel.cells.cell_model decorator)")
    return ResolvedModel(name, fn, params)


def check_declaration(model: str, declared) -> list[tuple[str, str]]:
    """Validate a model's declared columns.

    Raises
    ------
    NcreelError
        Not a list of (name, type) string pairs, a name that is not a lower-case SQL
        identifier, a duplicate, or the reserved names ``run``/``geom``.
    """
    from ncreel.pg.copytext import IDENTIFIER

    try:
        pairs = [(str(n), str(t)) for n, t in declared]
    except (TypeError, ValueError) as err:
        raise NcreelError(f"cell model '{model}': columns() must return [(name, pgtype), ...], "
                          f"got {declared!r:.200}") from err
    if not pairs:
        raise NcreelError(f"cell model '{model}': columns() declared no columns")
    seen = set()
    for n, t in pairs:
        if not IDENTIFIER.fullmatch(n):
            raise NcreelError(f"cell model '{model}': column name '{n}' must be a lower-case "
                              "SQL identifier [a-z_][a-z0-9_]*")
        if n in seen or n in (RUN_COLUMN, GEOMETRY_COLUMN):
            why = "is declared twice" if n in seen else "is reserved by ncreel"
            raise NcreelError(f"cell model '{model}': column '{n}' {why}")
        if not t.strip() or ";" in t:
            raise NcreelError(f"cell model '{model}': column '{n}' has type {t!r}")
        seen.add(n)
    return pairs


def check_columns(model: str, declared: Sequence[tuple[str, str]],
                  produced: Mapping[str, object]) -> dict[str, object]:
    """Validate one block's output against the declaration and coerce it for writing.

    Parameters
    ----------
    model : str
        Model name, for messages.
    declared : sequence of (str, str)
        ``(name, pgtype)`` in table order.
    produced : mapping of str to array
        The model's output (numpy arrays or polars Series).

    Returns
    -------
    dict of str to array
        In declared order; numeric arrays cast to the declared PostgreSQL type's width
        (``double precision`` → float64 so a float32 value loads exactly as itself).

    Raises
    ------
    NcreelError
        A missing or undeclared column, columns of different lengths, or a dtype that does
        not fit the declared type (e.g. float for ``integer``, float64 for ``real``).
    """
    from ncreel.pg.copytext import coerce_column

    if not isinstance(produced, Mapping):
        raise NcreelError(f"cell model '{model}': must return a dict of columns, got "
                          f"{type(produced).__name__}")
    names = [n for n, _ in declared]
    missing = [n for n in names if n not in produced]
    extra = [n for n in produced if n not in names]
    if missing or extra:
        raise NcreelError(f"cell model '{model}': returned columns differ from columns(): "
                          f"missing {missing}, undeclared {extra}")
    out, n_rows = {}, None
    for name, pgtype in declared:
        try:
            col = coerce_column(produced[name], pgtype)
        except (TypeError, ValueError) as err:
            raise NcreelError(f"cell model '{model}': column '{name}' ({pgtype}): {err}") from err
        if n_rows is None:
            n_rows = len(col)
        elif len(col) != n_rows:
            raise NcreelError(f"cell model '{model}': column '{name}' has {len(col)} rows, "
                              f"'{names[0]}' has {n_rows}")
        out[name] = col
    return out


# --- geometry ---------------------------------------------------------------------------

def corners_from_centres(c: np.ndarray) -> np.ndarray:
    """Cell edges from centres: midpoints between neighbours, extrapolated at the ends.

    Parameters
    ----------
    c : numpy.ndarray, shape (n,)
        Cell centres along one axis (n >= 1; a single cell gets edges ±0.5).

    Returns
    -------
    numpy.ndarray, shape (n + 1,), float64
    """
    c = np.asarray(c, dtype=np.float64)
    if len(c) == 1:
        return np.array([c[0] - 0.5, c[0] + 0.5])
    mid = (c[:-1] + c[1:]) / 2
    return np.concatenate([[c[0] - (mid[0] - c[0])], mid, [c[-1] + (c[-1] - mid[-1])]])


def corners_2d(c: np.ndarray) -> np.ndarray:
    """Cell corners of a curvilinear grid: mean of the 4 surrounding (extrapolated) centres.

    Parameters
    ----------
    c : numpy.ndarray, shape (ny, nx)
        Centre latitude or longitude.

    Returns
    -------
    numpy.ndarray, shape (ny + 1, nx + 1), float64
    """
    c = np.asarray(c, dtype=np.float64)
    # Pad by linear extrapolation so edge corners sit half a cell outside the edge centres.
    p = np.pad(c, 1, mode="reflect", reflect_type="odd")
    return (p[:-1, :-1] + p[1:, :-1] + p[:-1, 1:] + p[1:, 1:]) / 4


def bounds_1d(ds, name: str) -> tuple[np.ndarray, np.ndarray] | None:
    """Lower and upper cell edges of 1-D coordinate `name` from its CF ``bounds`` variable.

    CF conventions section 7.1: ``bounds`` names a ``(n, 2)`` variable. Bounds need not be
    contiguous, so each cell keeps its own pair.

    Returns
    -------
    (lo, hi) : tuple of numpy.ndarray, each shape (n,), float64; or None
        None when the coordinate has no usable ``bounds`` attribute (then use
        :func:`corners_from_centres`).
    """
    var = ds.variables.get(name)
    bname = var.attrs.get("bounds") if var is not None else None
    if not bname or bname not in ds.variables:
        return None
    b = np.asarray(ds[bname].values, dtype=np.float64)
    if b.ndim != 2 or b.shape[1] != 2 or b.shape[0] != var.size:
        return None
    return b.min(axis=1), b.max(axis=1)


def _edges(ds, name: str, centres: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    found = bounds_1d(ds, name) if ds is not None else None
    if found is not None:
        return found
    e = corners_from_centres(centres)
    return np.minimum(e[:-1], e[1:]), np.maximum(e[:-1], e[1:])


@dataclass(frozen=True)
class CellGeometry:
    """Corner coordinates of every cell, for the optional polygon column.

    Attributes
    ----------
    lon_c, lat_c : tuple of 4 numpy.ndarray, degrees
        Corner k (0: lower-left, 1: lower-right, 2: upper-right, 3: upper-left in index
        space) of every cell. Rectilinear grids store 1-D per-axis edges, shape (nx,) for
        lon and (ny,) for lat; curvilinear grids store shape (ny, nx) arrays.
    rectilinear : bool
    """

    lon_c: tuple
    lat_c: tuple
    rectilinear: bool
    nx: int

    @classmethod
    def from_dataset(cls, ds, *, y_dim: str, x_dim: str, lat: np.ndarray | None,
                     lon: np.ndarray | None) -> CellGeometry:
        """Corners from CF bounds of 1-D ``lat``/``lon`` coordinates, else from centres.

        Rectilinear grids (1-D coordinates) use the coordinates' CF ``bounds`` when
        present, else midpoints between neighbouring centres, extrapolated by half a cell
        at the edges. Curvilinear grids (2-D coordinates) use the mean of the four
        surrounding centres (:func:`corners_2d`).

        Raises
        ------
        NcreelError
            If the grid has no latitude/longitude (a projected x/y grid).
        """
        if lat is None or lon is None:
            raise NcreelError("config key 'cells.geometry': the grid has no latitude/"
                              "longitude coordinates, so cell polygons cannot be built")
        ny, nx = lat.shape
        if np.all(lat == lat[:, :1]) and np.all(lon == lon[:1, :]):
            y_lo, y_hi = _edges(ds, y_dim, lat[:, 0])
            x_lo, x_hi = _edges(ds, x_dim, lon[0, :])
            return cls(lon_c=(x_lo, x_hi, x_hi, x_lo), lat_c=(y_lo, y_lo, y_hi, y_hi),
                       rectilinear=True, nx=nx)
        la, lo = corners_2d(lat), corners_2d(lon)
        cut = [(slice(0, -1), slice(0, -1)), (slice(0, -1), slice(1, None)),
               (slice(1, None), slice(1, None)), (slice(1, None), slice(0, -1))]
        return cls(lon_c=tuple(lo[c] for c in cut), lat_c=tuple(la[c] for c in cut),
                   rectilinear=False, nx=nx)

    @classmethod
    def from_series(cls, series) -> CellGeometry:
        """Corners of the cells of an opened :class:`ncreel.source.Series`, in its orientation.

        Rectilinear grids use the CF ``bounds`` of the latitude/longitude coordinates when
        present, else midpoints between neighbouring centres (:func:`corners_from_centres`);
        curvilinear grids the mean of the four surrounding centres (:func:`corners_2d`),
        computed on longitudes unwrapped along the rows. Every longitude corner is then
        taken modulo 360 degrees to lie within 180 degrees of its own cell's centre, so no
        polygon is wider than its cell where longitudes jump (e.g. from 180 to -180).

        Raises
        ------
        NcreelError
            If the grid has no latitude/longitude (a projected x/y grid).
        """
        lat, lon = series.cell_coordinates()
        if lat is None or lon is None:
            raise NcreelError("config key 'cells.geometry': the grid has no latitude/"
                              "longitude coordinates, so cell polygons cannot be built")
        _, lon_cont = series.cell_coordinates(continuous=True)
        ny, nx = lat.shape
        if np.all(lat == lat[:, :1]) and np.all(lon == lon[:1, :]):
            y_lo, y_hi = series.coordinate_bounds("lat") or _edges(None, "", lat[:, 0])
            x_lo, x_hi = series.coordinate_bounds("lon") or _edges(None, "", lon[0, :])
            x_lo, x_hi = (lon[0] + wrap_longitude(e - lon[0]) for e in (x_lo, x_hi))
            return cls(lon_c=(x_lo, x_hi, x_hi, x_lo), lat_c=(y_lo, y_lo, y_hi, y_hi),
                       rectilinear=True, nx=nx)
        la, lo = corners_2d(lat), corners_2d(lon_cont)
        cut = [(slice(0, -1), slice(0, -1)), (slice(0, -1), slice(1, None)),
               (slice(1, None), slice(1, None)), (slice(1, None), slice(0, -1))]
        return cls(lon_c=tuple(lon + wrap_longitude(lo[c] - lon) for c in cut),
                   lat_c=tuple(la[c] for c in cut), rectilinear=False, nx=nx)

    def polygons(self, cell: np.ndarray):
        """EWKT polygons ``SRID=4326;POLYGON((lon lat, ...))`` of the given flat cells.

        Parameters
        ----------
        cell : numpy.ndarray, shape (n,), int
            Row-major cell ids ``iy * nx + ix``.

        Returns
        -------
        polars.Series of str, length n
            Closed 5-point rings, corners in shortest round-trip decimal form; loads into
            ``text`` or PostGIS ``geometry``. Longitudes are as stored (0–360 stays 0–360).
        """
        import polars as pl

        cell = np.asarray(cell, dtype=np.int64)
        iy, ix = np.divmod(cell, self.nx)
        parts: list = [pl.lit("SRID=4326;POLYGON((")]
        for k in (0, 1, 2, 3, 0):
            if self.rectilinear:
                x, y = self.lon_c[k][ix], self.lat_c[k][iy]
            else:
                x, y = self.lon_c[k].reshape(-1)[cell], self.lat_c[k].reshape(-1)[cell]
            parts += [pl.Series(x).cast(pl.Utf8), pl.lit(" "), pl.Series(y).cast(pl.Utf8),
                      pl.lit(",")]
        parts[-1] = pl.lit("))")
        return pl.select(pl.concat_str(parts).alias(GEOMETRY_COLUMN)).to_series()


# --- one shard's rows -------------------------------------------------------------------

@dataclass
class ShardRows:
    """Computes and writes the COPY rows of one shard's blocks with the configured model.

    Attributes
    ----------
    model : ResolvedModel
    ctx : CellContext
    columns : list of (str, str)
        Declared columns plus the geometry column when enabled.
    geometry : CellGeometry or None
    """

    model: ResolvedModel
    ctx: CellContext
    columns: list
    geometry: CellGeometry | None = None

    @classmethod
    def for_series(cls, series, *, cell_mean: np.ndarray, cells: Mapping,
                   state: Mapping | None = None) -> ShardRows:
        """Set up the configured model for an opened :class:`ncreel.source.Series`.

        Parameters
        ----------
        series : ncreel.source.Series
        cell_mean : numpy.ndarray, shape (ny, nx)
            Per-cell mean from the statistics rule.
        cells : mapping
            ``model``, ``params``, ``geometry`` as from :func:`cells_settings`.
        state : mapping, optional
            Pre-pass results for the model (:attr:`CellContext.state`).
        """
        lat, lon = series.cell_coordinates()
        ctx = CellContext(time=series.time_axis(), cell_mean=cell_mean, lat=lat, lon=lon,
                          value_type=value_type(series.dtype), variable=series.variable,
                          read_variable=series.read_variable, state=dict(state or {}))
        model = resolve_model(cells["model"], cells["params"])
        geometry = None
        if cells["geometry"] != "none":
            geometry = CellGeometry.from_series(series)
        return cls(model=model, ctx=ctx,
                   columns=table_columns(model, ctx, geometry=cells["geometry"]),
                   geometry=geometry)

    #: Rows formatted per write call when the polygon column is on: its text (~150 bytes
    #: per row) is built per slice, so it adds a bounded amount of memory, not per block.
    geometry_chunk_rows: int = 250_000

    def rows(self, t0: int, block: np.ndarray) -> dict[str, object]:
        """Return the checked, coerced model columns of one block (without ``geom``)."""
        declared = self.columns[:-1] if self.geometry is not None else self.columns
        out = check_columns(self.model.name, declared, self.model(block, t0, self.ctx))
        if self.geometry is not None and "cell_id" not in out:
            raise NcreelError(f"cell model '{self.model.name}': cells.geometry needs a "
                              "'cell_id' column (row-major iy * nx + ix)")
        return out

    def write(self, fh, t0: int, block: np.ndarray) -> int:
        """Append one block's rows to `fh` in COPY text format; returns rows written."""
        from ncreel.pg.copytext import write_copy_rows

        out = self.rows(t0, block)
        if self.geometry is None:
            return write_copy_rows(fh, out)
        n = len(out["cell_id"])
        step = self.geometry_chunk_rows
        for a in range(0, n, step):
            part = {k: v[a:a + step] for k, v in out.items()}
            part[GEOMETRY_COLUMN] = self.geometry.polygons(np.asarray(part["cell_id"]))
            write_copy_rows(fh, part)
        return n


def table_columns(model: ResolvedModel, ctx: CellContext, *,
                  geometry: str = "none") -> list[tuple[str, str]]:
    """Return the COPY file's columns: the model's declaration plus ``geom`` if enabled."""
    cols = model.columns(ctx)
    if geometry != "none":
        cols.append((GEOMETRY_COLUMN, GEOMETRY_TYPES[geometry]))
    return cols


def cells_settings(cells: Mapping) -> dict:
    """Normalise config ``cells`` into what the jobs need.

    Parameters
    ----------
    cells : mapping
        Config ``cells`` (schema defaults applied): ``model``, ``params``, ``etr``,
        ``geometry``, ``compression``, ``compression_level``.

    Returns
    -------
    dict
        ``model`` (name), ``params`` (``etr`` merged over :data:`ETR_DEFAULTS` for
        ``etr_risk``, ``params`` for a user model, none for ``field``), ``geometry``,
        ``compression``, ``compression_level``, ``suffix`` (file-name suffix of the COPY
        files: ``.copy``, ``.copy.gz``, ``.copy.zst``).
    """
    if "suffix" in cells:  # already normalised (rule params pass this dict on)
        return dict(cells)
    name = cells.get("model", "field")
    if name == "etr_risk":
        legacy, etr = dict(cells.get("params") or {}), dict(cells.get("etr") or {})
        both = sorted(set(legacy) & set(etr))
        if both:
            raise NcreelError(f"config keys 'cells.params' and 'cells.etr' both set "
                              f"{', '.join(both)}: give etr_risk settings in cells.etr only")
        if legacy:
            # cells.etr is the documented key; cells.params still works for etr_risk.
            logging.getLogger(__name__).warning(
                "config key 'cells.params' for etr_risk is deprecated: move %s to "
                "cells.etr", ", ".join(sorted(legacy)))
        params = {**ETR_DEFAULTS, **legacy, **etr}
        _check_etr(params)
    elif name == "field":
        params = {}
    else:
        params = dict(cells.get("params") or {})
    compression = cells.get("compression", "none")
    return {"model": name, "params": params, "geometry": cells.get("geometry", "none"),
            "compression": compression, "compression_level": cells.get("compression_level"),
            "suffix": {"none": ".copy", "gzip": ".copy.gz", "zstd": ".copy.zst"}[compression]}


def series_columns(series, cells: Mapping) -> list[tuple[str, str]]:
    """Columns of the run's COPY file, from the series header only (parse time).

    Resolves (imports) the model, so a bad ``cells.model`` fails before any job runs.
    """
    ctx = CellContext(time=series.time_axis(), cell_mean=np.empty(0),
                      lat=None, lon=None, value_type=value_type(series.dtype),
                      variable=series.variable)
    return table_columns(resolve_model(cells["model"], cells["params"]), ctx,
                         geometry=cells["geometry"])
