"""The ``etr_risk`` model: environmental risk of a plant protection product in soil.

Its time course after application is :mod:`ncreel.cells.soil`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from ncreel.cells.context import CellContext, cell_model
from ncreel.cells.field import _position, _present_rows, _time_column
from ncreel.cells.soil import (
    applications,
    build_clock,
    check_time_course,
    time_course,
    time_course_columns,
    time_course_enabled,
)
from ncreel.config.configcheck import schema_defaults
from ncreel.core.errors import NcreelError

#: Risk classes of :func:`etr_risk_model`, lowest first (one more than thresholds).
RISK_CLASSES = ("very low", "low", "medium", "high")


#: Defaults of the ``etr_risk`` parameters (config ``cells.params``); see
#: :func:`etr_risk_model`. Read from the config schema's ``$defs/etr_params``, their only home.
ETR_DEFAULTS = schema_defaults("$defs", "etr_params")


def etr_columns(ctx: CellContext, **params) -> list[tuple[str, str]]:
    """Column names and PostgreSQL types written by :func:`etr_risk_model`, in order.

    With applications configured, :func:`ncreel.cells.soil.time_course_columns` follow.
    """
    p = {**ETR_DEFAULTS, **params}
    extra = time_course_columns(ctx.time.postgres_type, p) \
        if time_course_enabled(p) else []
    return [
        ("time_index", "integer"),
        ("time", ctx.time.postgres_type),
        ("cell_id", "bigint"),
        ("lat", "double precision"),
        ("lon", "double precision"),
        ("lon_raw", "double precision"),
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
    unknown = sorted(set(params) - set(ETR_DEFAULTS))
    if unknown:
        raise NcreelError(f"config key 'cells.params': unknown setting(s) {', '.join(unknown)} "
                          f"(known: {', '.join(ETR_DEFAULTS)})")
    if time_course_enabled(params):
        check_time_course(params)
    t = list(params["thresholds"])
    if len(t) != len(RISK_CLASSES) - 1 or any(b <= a for a, b in zip(t, t[1:], strict=False)):
        raise NcreelError(f"config key 'cells.params.thresholds': need {len(RISK_CLASSES) - 1} "
                          f"increasing ETR thresholds (very low|low|medium|high), got {t}")
    for key in ("assumed_depth_m", "soil_density_kg_m3", "ec50_mg_kg"):
        if not params[key] > 0:
            raise NcreelError(f"config key 'cells.params.{key}': must be > 0, got {params[key]}")


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
        settings (docs/etr-risk.md, "Time course after application"); defaults in
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
    lat, lon, lon_raw = _position(ctx, cell)
    extra = _etr_time_course(p, block, t0, ctx, t_local, cell)
    return {
        "time_index": (t_local + t0).astype(np.int32),
        "time": _time_column(ctx, t0, n_t, t_local),
        "cell_id": cell.astype(np.int64),
        "lat": lat,
        "lon": lon,
        "lon_raw": lon_raw,
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
    if not time_course_enabled(p):
        return {}
    n_cells = block.shape[1] * block.shape[2]
    # Set up once per shard (the same ctx serves all its blocks) and per parameter set.
    key = repr(sorted(p.items()))
    cached = ctx.state.get("etr_time_course")
    if cached is None or cached[0] != key:
        clock = build_clock(p, ctx.time, read_variable=ctx.read_variable,
                                 n_cells=n_cells, state=ctx.state.get("degradation"))
        apps = applications(p, ctx.time.calendar)
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
    return time_course(p=p, clock=clock, pec0=pec0, t0=t0, n_t=block.shape[0],
                            t_local=t_local, cell=cell, app_labels=labels)
