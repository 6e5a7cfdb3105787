"""Soil fate after application for the ``etr_risk`` model: decay, TWA, plateau, temperature.

Formulas (sources in docs/etr-risk.md, "Time course after application"):

- first-order decay, ``k = ln 2 / DT50`` (FOCUS 1997; EFSA 2017 soil guidance);
- backward time-weighted average over a window of ``w`` days, which for one application
  ``w`` days after it is ``PEC₀ (1 − e^(−k w)) / (k w)`` (FOCUS 1997);
- the multi-year plateau in the tillage layer, ``PEC_plateau = PEC_year × (d/d_mix) ×
  f (1 − fⁿ) / (1 − f)`` with ``f = e^(−k Y)`` (``f / (1 − f)`` for n → ∞), and
  ``PEC_max = PEC_plateau + PEC_season`` (FOCUS 1997; EFSA 2017);
- the Arrhenius temperature correction of the rate, ``k(T) = k_ref exp(−Eₐ/R (1/T −
  1/T_ref))`` with ``Eₐ = 65.4 kJ/mol`` and ``T_ref = 20 °C`` (EFSA 2008, Q10/Arrhenius
  opinion, EFSA Journal 622; EFSA 2017).

With a temperature variable, degradation runs on *degradation time* ``τ`` (days at the
reference temperature): ``τ(d_i) = Σ_{m<i} f(T_m) (d_{m+1} − d_m)`` over the series' steps
(the temperature of a step holds until the next step). Shards are independent jobs, so
:func:`degradation_prepass` streams the whole series once and stores each cell's ``τ`` at
every shard start, at every application instant and at the last step;
:class:`DegradationClock` continues from those inside a shard.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import cftime
import numpy as np

from ncreel.core.errors import NcreelError
from ncreel.core.io import atomic_path
from ncreel.input.source import MAX_BLOCK_CELLS
from ncreel.input.timeaxis import ISO_FORM, iso_fields
from ncreel.input.units import same_units

#: Molar gas constant R, J/(mol K) (CODATA 2018, exact).
GAS_CONSTANT_J_MOL_K = 8.314462618
#: 0 °C in kelvin.
ZERO_C_K = 273.15
#: Reference units for day numbers computed from the series' labels.
DAY_UNITS = "days since 1970-01-01 00:00:00"

def first_order_rate_per_day(dt50_days: float | None) -> float:
    """Return the first-order rate constant ``k = ln 2 / DT50``, 1/day (0 for DT50 null).

    Raises
    ------
    NcreelError
        DT50 not > 0.
    """
    if dt50_days is None:
        return 0.0
    if not dt50_days > 0:
        raise NcreelError(f"config key 'cells.params.dt50_days': must be > 0, got {dt50_days}")
    return math.log(2.0) / float(dt50_days)


def arrhenius_factor(temperature_k, *, ea_kj_mol: float = 65.4,
                     reference_c: float = 20.0) -> np.ndarray:
    """Rate multiplier ``k(T) / k(T_ref) = exp(−Eₐ/R (1/T − 1/T_ref))``, dimensionless.

    Parameters
    ----------
    temperature_k : float or numpy.ndarray
        Soil (or air) temperature T, kelvin; NaN gives NaN.
    ea_kj_mol : float
        Activation energy Eₐ, kJ/mol (EFSA 2008: 65.4).
    reference_c : float
        Reference temperature of the DT50, °C (EFSA: 20).

    Returns
    -------
    numpy.ndarray, float64, shape of `temperature_k`
    """
    t = np.asarray(temperature_k, dtype=np.float64)
    t_ref = reference_c + ZERO_C_K
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.exp(-ea_kj_mol * 1e3 / GAS_CONSTANT_J_MOL_K * (1.0 / t - 1.0 / t_ref))


def parse_date(text: str, calendar: str, key: str = "cells.params.applications") -> cftime.datetime:
    """Parse an ISO 8601 date[-time] as a date of the series' CF `calendar`.

    The form is the package's one (:func:`ncreel.input.timeaxis.iso_fields`), as for time strings
    in files.

    Raises
    ------
    NcreelError
        Not that form, or not a date of the calendar (e.g. 2001-02-29 in ``noleap``).
    """
    fields = iso_fields(text)
    if fields is None:
        raise NcreelError(f"config key '{key}': date {text!r} is not {ISO_FORM}")
    try:
        return cftime.datetime(*fields, calendar=calendar)
    except (ValueError, TypeError) as err:
        raise NcreelError(f"config key '{key}': {text!r} is not a date of calendar "
                          f"'{calendar}' ({err})") from err


def label_days(labels: Sequence[str], calendar: str) -> np.ndarray:
    """Day numbers (days since 1970-01-01 in `calendar`) of ISO labels, shape (n,), float64."""
    if not len(labels):
        return np.empty(0)
    dates = [parse_date(s, calendar, "time") for s in labels]
    return np.asarray(cftime.date2num(dates, DAY_UNITS, calendar=calendar), dtype=np.float64)


def applications(p: Mapping, calendar: str) -> list[tuple[float, float, str]]:
    """Return the applications as ``(day number, rate g/ha, ISO label)``, in time order.

    Either ``applications`` (list of ``{date, rate_g_ha}``, rate defaulting to
    ``application_rate_g_ha``) or ``first_application`` + ``application_number`` +
    ``application_interval_days`` at ``application_rate_g_ha``; none gives ``[]``.

    Raises
    ------
    NcreelError
        Both forms given, a bad date, or a negative rate/interval.
    """
    listed, first = p.get("applications") or [], p.get("first_application")
    if listed and first:
        raise NcreelError("config keys 'cells.params.applications' and 'cells.params."
                          "first_application': give one of them, not both")
    out = []
    if first:
        n = int(p.get("application_number") or 1)
        gap = float(p.get("application_interval_days") or 0)
        if n < 1 or gap < 0 or (n > 1 and gap <= 0):
            raise NcreelError("config keys 'cells.params.application_number' (>= 1) and "
                              "'application_interval_days' (> 0 for several): got "
                              f"{n} and {gap}")
        d0 = float(cftime.date2num(parse_date(first, calendar), DAY_UNITS, calendar=calendar))
        for i in range(n):
            day = d0 + i * gap
            label = cftime.num2date(day, DAY_UNITS, calendar=calendar).isoformat()
            out.append((day, float(p["application_rate_g_ha"]), label))
    for a in listed:
        if not isinstance(a, Mapping) or "date" not in a:
            raise NcreelError(f"config key 'cells.params.applications': each item needs a date, "
                              f"got {a!r}")
        rate = float(a.get("rate_g_ha", p["application_rate_g_ha"]))
        if rate < 0:
            raise NcreelError(f"config key 'cells.params.applications': rate_g_ha {rate} < 0")
        dt = parse_date(a["date"], calendar)
        out.append((float(cftime.date2num(dt, DAY_UNITS, calendar=calendar)), rate,
                    dt.isoformat()))
    return sorted(out)


def twa_window(pec0, k_per_day, age_days, window_days) -> np.ndarray:
    """Backward time-weighted average, over ``[t − w, t]``, of one first-order decaying dose.

    ``TWA = PEC₀ (e^(−k a) − e^(−k age)) / (k w)`` with ``a = max(age − w, 0)`` the start of
    the window after the application (0 before it: the dose did not exist yet); for
    ``age = w`` this is FOCUS's ``PEC₀ (1 − e^(−k w)) / (k w)``; ``k = 0`` gives
    ``PEC₀ (age − a) / w``.

    Parameters
    ----------
    pec0 : numpy.ndarray, mg/kg
        Initial concentration of the dose.
    k_per_day : float or numpy.ndarray, 1/day
        Rate (may differ per element).
    age_days : numpy.ndarray, days
        Time since the application; negative (not yet applied) gives 0.
    window_days : float
        Window length w > 0, days.

    Returns
    -------
    numpy.ndarray, float64, mg/kg, broadcast shape of the inputs
    """
    age = np.maximum(np.asarray(age_days, dtype=np.float64), 0.0)
    a = np.maximum(age - window_days, 0.0)
    k = np.asarray(k_per_day, dtype=np.float64)
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        decayed = (np.exp(-k * a) - np.exp(-k * age)) / np.where(k > 0, k, 1.0)
        area = np.where(k > 0, decayed, age - a)
    return pec0 * area / window_days


def plateau(pec_year, k_per_day, *, year_days: float, n_years: float,
            application_depth_m: float, tillage_depth_m: float) -> np.ndarray:
    """Background PEC from `n_years` earlier seasons, mixed into the tillage layer, mg/kg.

    ``PEC_plateau = PEC_year × (d / d_mix) × f (1 − fⁿ) / (1 − f)``, ``f = e^(−k Y)``; for
    ``n = inf`` ``f / (1 − f)``; for ``k = 0`` ``n × PEC_year × d / d_mix``. Each earlier
    season left ``f`` of its dose one year after it, diluted from the application layer
    ``d`` into the tillage depth ``d_mix`` (same bulk density), FOCUS (1997), EFSA (2017).

    Parameters
    ----------
    pec_year : numpy.ndarray, mg/kg
        Sum of one season's initial PECs (in the application layer).
    k_per_day : float or numpy.ndarray, 1/day
    year_days : float
        Time between seasons Y, days.
    n_years : float
        Earlier seasons n (>= 1, or inf).
    application_depth_m, tillage_depth_m : float
        d and d_mix, m.

    Returns
    -------
    numpy.ndarray, float64, mg/kg
    """
    k = np.asarray(k_per_day, dtype=np.float64)
    f = np.exp(-k * year_days)
    ratio = application_depth_m / tillage_depth_m
    with np.errstate(invalid="ignore", divide="ignore"):
        if math.isinf(n_years):
            acc = f / (1.0 - f)
        else:
            acc = np.where(f < 1.0, f * (1.0 - f ** n_years) / np.where(f < 1.0, 1.0 - f, 1.0),
                           float(n_years))
    return pec_year * ratio * acc


# --- degradation time: the pre-pass and the per-shard clock --------------------------

def _temperature_k(values: np.ndarray, units: str) -> np.ndarray:
    return values + ZERO_C_K if units == "degC" else values


def _next_days(days: np.ndarray, all_days_after: float | None) -> np.ndarray:
    """Step lengths ``d_{i+1} − d_i`` of a block; the series' last step gets 0."""
    nxt = np.append(days[1:], days[-1] if all_days_after is None else all_days_after)
    return nxt - days


@dataclass
class DegradationClock:
    """Each cell's degradation time ``τ`` (days at the reference temperature).

    Without a temperature variable ``τ = d − d₀`` (days since the first step) everywhere.
    With one, ``τ`` comes from :func:`degradation_prepass` at checkpoints (shard starts)
    and is continued over the blocks of a shard, which the shard reads in order.

    Attributes
    ----------
    days : numpy.ndarray, shape (n_time,)
        Day numbers of the series' steps.
    app_days : numpy.ndarray, shape (n_app,)
        Day numbers of the applications.
    factor : callable or None
        ``factor(start, stop) -> (stop − start, ny * nx)`` Arrhenius factors; None without
        a temperature variable.
    checkpoints : dict of int to numpy.ndarray (ny * nx,)
        ``τ`` at those global steps.
    app_tau : numpy.ndarray, shape (n_app, ny * nx) or (n_app, 1)
        ``τ`` at each application instant.
    last_tau : numpy.ndarray, shape (ny * nx,) or (1,)
        ``τ`` at the last step.
    """

    days: np.ndarray
    app_days: np.ndarray
    factor: Callable[[int, int], np.ndarray] | None = None
    checkpoints: dict = field(default_factory=dict)
    app_tau: np.ndarray | None = None
    last_tau: np.ndarray | None = None
    cache: dict = field(default_factory=dict)

    @classmethod
    def constant(cls, days: np.ndarray, app_days: np.ndarray) -> DegradationClock:
        """Clock at the reference temperature everywhere (no temperature variable)."""
        d0 = days[0]
        return cls(days=days, app_days=app_days, app_tau=(app_days - d0)[:, None],
                   last_tau=np.array([days[-1] - d0]))

    def mean_factor(self) -> np.ndarray:
        """Mean rate factor over the series per cell, ``τ_last / (d_last − d₀)``."""
        span = self.days[-1] - self.days[0]
        return np.ones_like(self.last_tau) if span <= 0 else self.last_tau / span

    def tau(self, t0: int, n_t: int) -> np.ndarray:
        """``τ`` at global steps ``t0 : t0 + n_t``, shape (n_t, ny * nx) or (n_t, 1)."""
        if self.factor is None:
            return (self.days[t0:t0 + n_t] - self.days[0])[:, None]
        cont = self.cache.get("next")
        start = cont[1] if cont is not None and cont[0] == t0 else None
        if start is None:
            # Not continuing the previous block: start at the last checkpoint before t0.
            c = max((s for s in self.checkpoints if s <= t0), default=None)
            if c is None:
                raise NcreelError(f"degradation state has no checkpoint at or before step {t0}")
            start = self.checkpoints[c]
            if c < t0:
                f = self.factor(c, t0)
                start = start + (f * _next_days(self.days[c:t0], self.days[t0])[:, None]).sum(0)
        stop = t0 + n_t
        f = self.factor(t0, stop)
        self.cache["factor"] = (t0, stop, f)
        nxt = self.days[stop] if stop < len(self.days) else None
        steps = f * _next_days(self.days[t0:stop], nxt)[:, None]
        out = start + np.concatenate([np.zeros((1, steps.shape[1])), np.cumsum(steps, 0)[:-1]])
        self.cache["next"] = (stop, out[-1] + steps[-1])
        return out


def degradation_prepass(factor: Callable[[int, int], np.ndarray], days: np.ndarray,
                        app_days: np.ndarray, starts: Sequence[int], *, n_cells: int,
                        out: np.ndarray | None = None,
                        max_block_cells: int = MAX_BLOCK_CELLS) -> dict:
    """Stream the series once; record ``τ`` at `starts`, at the applications and at the end.

    Memory: one block of factors and one ``(n_cells,)`` accumulator; the results go to
    `out` (e.g. a memory-mapped ``.npy``) row by row.

    Parameters
    ----------
    factor : callable
        ``factor(start, stop) -> (stop − start, n_cells)`` Arrhenius factors (NaN where the
        temperature is missing: ``τ`` of that cell stays NaN from there on).
    days : numpy.ndarray, shape (n_time,)
        Day numbers of the steps, increasing.
    app_days : numpy.ndarray, shape (n_app,)
        Application day numbers within ``days[0] … days[-1]``.
    starts : sequence of int
        Global steps (shard starts) at which to record ``τ``.
    n_cells : int
        ``ny * nx``.
    out : numpy.ndarray, shape (n_starts + n_app + 1, n_cells), float64, optional
        Where to write (allocated when None); rows: sorted unique `starts`, applications,
        last step.

    Returns
    -------
    dict
        ``steps`` (sorted unique starts) and ``tau`` (`out`), days at 20 °C-equivalent.
    """
    n_time = len(days)
    steps = sorted({int(s) for s in starts})
    row_of = {s: r for r, s in enumerate(steps)}
    n_s, n_a = len(steps), len(app_days)
    if out is None:
        out = np.empty((n_s + n_a + 1, n_cells))
    # Application a falls in step i with days[i] <= D < days[i+1].
    app_step = np.searchsorted(days, app_days, side="right") - 1
    tau = np.zeros(n_cells)
    per_block = max(1, max_block_cells // max(n_cells, 1))
    for t0 in range(0, n_time, per_block):
        stop = min(t0 + per_block, n_time)
        f = factor(t0, stop)
        dt = _next_days(days[t0:stop], days[stop] if stop < n_time else None)
        for i in range(t0, stop):
            if i in row_of:
                out[row_of[i]] = tau
            for a in np.nonzero(app_step == i)[0]:
                out[n_s + a] = tau + f[i - t0] * (app_days[a] - days[i])
            if i == n_time - 1:
                out[n_s + n_a] = tau
            tau = tau + f[i - t0] * dt[i - t0]
    return {"steps": steps, "tau": out}


def write_series_degradation_state(series, p: Mapping, starts: Sequence[int],
                                   npy: str | os.PathLike, meta_json: str | os.PathLike) -> dict:
    """Run :func:`degradation_prepass` on a :class:`ncreel.input.source.Series`; write the state.

    Writes ``npy`` (float64, shape (n_starts + n_app + 1, ny * nx), memory-mapped while
    written) and ``meta_json`` (``steps``, ``n_applications``), each renamed into place
    only when complete.
    """
    time = series.time_axis()
    days = label_days(time.labels, time.calendar)
    app_days = np.array([a[0] for a in applications(p, time.calendar)])
    n_cells = series.ny * series.nx
    factor = factor_reader(series.read_variable, p["temperature_variable"],
                           units=p["temperature_units"], ea_kj_mol=p["ea_kj_mol"],
                           reference_c=p["reference_temperature_c"], n_cells=n_cells)
    steps = sorted({int(s) for s in starts})
    with atomic_path(npy) as tmp:
        out = np.lib.format.open_memmap(tmp, mode="w+", dtype=np.float64,
                                        shape=(len(steps) + len(app_days) + 1, n_cells))
        state = degradation_prepass(factor, days, app_days, steps, n_cells=n_cells, out=out)
        out.flush()
        del out
    meta = {"steps": state["steps"], "n_applications": len(app_days)}
    with atomic_path(meta_json) as tmp:
        tmp.write_text(json.dumps(meta) + "\n")
    return meta


def read_degradation_state(npy: str | os.PathLike, meta_json: str | os.PathLike) -> dict:
    """Read back :func:`write_series_degradation_state` (memory-mapped)."""
    meta = json.loads(Path(meta_json).read_text())
    return {"steps": meta["steps"], "tau": np.load(npy, mmap_mode="r")}


def factor_reader(read_variable: Callable, name: str, *, units: str, ea_kj_mol: float,
                  reference_c: float, n_cells: int) -> Callable[[int, int], np.ndarray]:
    """``factor(start, stop)`` reading temperature variable `name` (K or degC)."""
    def factor(start: int, stop: int) -> np.ndarray:
        t = np.asarray(read_variable(name, start, stop), dtype=np.float64)
        t = t.reshape(-1, n_cells) if t.ndim == 3 else np.broadcast_to(
            t.reshape(1, n_cells), (stop - start, n_cells))
        return arrhenius_factor(_temperature_k(t, units), ea_kj_mol=ea_kj_mol,
                                reference_c=reference_c)
    return factor


# --- the model's time-course columns -------------------------------------------------

def time_course_enabled(p: Mapping) -> bool:
    """Return True when applications are configured (the time-course columns are written)."""
    return bool(p.get("applications") or p.get("first_application"))


def window_name(w: float) -> str:
    """Column-name form of a window length in days: 21 -> ``21``, 7.5 -> ``7_5``."""
    return f"{float(w):g}".replace(".", "_").replace("-", "m")


def time_course_columns(time_type: str, p: Mapping) -> list[tuple[str, str]]:
    """Columns added to ``etr_risk`` by the time course, in order (see docs/etr-risk.md)."""
    d = "double precision"
    cols = [("days_since_first_application_d", d), ("pec_act_mg_kg", d)]
    cols += [(f"pec_twa_{window_name(w)}d_mg_kg", d) for w in p["twa_windows_days"]]
    cols += [("pec_season_max_mg_kg", d), ("pec_season_max_time", time_type)]
    if p.get("plateau_years") is not None:
        cols += [("pec_plateau_mg_kg", d), ("pec_max_mg_kg", d)]
    cols += [("etr_acute", d), ("etr_acute_exceeded", "boolean"),
             ("etr_long_term", d), ("etr_long_term_exceeded", "boolean")]
    if p.get("temperature_variable"):
        cols += [("degradation_rate_factor", d)]
    return cols


def check_time_course(p: Mapping) -> None:
    """Check the time-course settings that need no data.

    Raises
    ------
    NcreelError
        Naming the ``cells.params`` key and the allowed values.
    """
    first_order_rate_per_day(p.get("dt50_days"))
    for key in ("twa_windows_days",):
        ws = list(p[key])
        if not all(isinstance(w, (int, float)) and w > 0 for w in ws) or \
                len({window_name(w) for w in ws}) != len(ws):
            raise NcreelError(f"config key 'cells.params.{key}': need distinct numbers > 0, "
                              f"got {ws}")
    for key in ("long_term_twa_days", "noec_mg_kg", "tillage_depth_m", "year_days",
                "trigger_etr_acute", "trigger_etr_long_term"):
        if not p[key] > 0:
            raise NcreelError(f"config key 'cells.params.{key}': must be > 0, got {p[key]}")
    n = p.get("plateau_years")
    if n is not None:
        if not n >= 1:
            raise NcreelError(f"config key 'cells.params.plateau_years': must be >= 1 (or .inf), "
                              f"got {n}")
        if math.isinf(n) and p.get("dt50_days") is None:
            raise NcreelError("config key 'cells.params.plateau_years': .inf needs dt50_days "
                              "(without degradation the residue grows without bound)")
    if p["temperature_units"] not in ("K", "degC"):
        raise NcreelError("config key 'cells.params.temperature_units': K or degC, got "
                          f"{p['temperature_units']!r}")


def check_series(p: Mapping, time, read_variable: Callable | None, units_of: Callable | None):
    """Check the time course against the series at parse time (before any job).

    Parameters
    ----------
    p : mapping
        ``cells.params`` of etr_risk (defaults applied).
    time : ncreel.input.timeaxis.TimeAxis
    read_variable : callable or None
        As :attr:`ncreel.cells.CellContext.read_variable`, to check the temperature
        variable's dims (reads one step).
    units_of : callable or None
        ``units_of(name) -> str``, the variable's CF ``units`` attribute ('' if none).

    Raises
    ------
    NcreelError
        Undecoded time, an application outside the series, a temperature variable
        missing, on another grid, or with units other than ``temperature_units``.
    """
    if not time_course_enabled(p):
        return
    check_time_course(p)
    if not time.decoded:
        raise NcreelError("config key 'cells.params.applications': the series' time cannot be "
                          f"decoded ({time.note}), so days since application are unknown")
    days = label_days([time.labels[0], time.labels[-1]], time.calendar)
    for day, _, label in applications(p, time.calendar):
        if not days[0] <= day <= days[1]:
            raise NcreelError(f"config key 'cells.params.applications': {label} is outside the "
                              f"series ({time.labels[0]} .. {time.labels[-1]}, calendar "
                              f"{time.calendar})")
    name = p.get("temperature_variable")
    if name and read_variable is not None:
        read_variable(name, 0, 1)
        units = (units_of(name) if units_of else "") or ""
        # Lower-case spellings seen in files (a bare 'c' is Celsius here), then any UDUNITS
        # spelling of the unit ('degree_Celsius', 'deg_C', 'K').
        known = {"K": {"k", "kelvin", "degk"},
                 "degC": {"degc", "celsius", "degree_celsius", "degrees_celsius", "°c", "c"}}
        want = p["temperature_units"]
        if units and units.strip().lower() not in known[want]:
            same = same_units(units, want)
            if not same:
                unsure = ("" if same is False else
                          " (not a UDUNITS unit ncreel can read)")
                raise NcreelError(f"config key 'cells.params.temperature_units': is {want}, "
                                  f"but '{name}' has units '{units}'{unsure}")


def check_run(series, cells: Mapping) -> None:
    """Parse-time check of an ``etr_risk`` time course against an opened series.

    Parameters
    ----------
    series : ncreel.input.source.Series
    cells : mapping
        As from :func:`ncreel.cells.cells_settings`; anything but ``etr_risk`` passes.

    Raises
    ------
    NcreelError
        An interception variable that cannot be read, or see :func:`check_series`.
    """
    if cells.get("model") != "etr_risk":
        return
    icpt = cells["params"].get("interception_variable")
    if icpt:  # a missing or misshapen variable fails here, not in every shard job
        series.read_variable(icpt, 0, 1)

    def units_of(name):
        return str(series._dataset(0)[name].attrs.get("units", ""))

    check_series(cells["params"], series.time_axis(), series.read_variable, units_of)


def needs_prepass(cells: Mapping) -> bool:
    """Return True when the run needs the ``degradation_state`` pre-pass."""
    p = cells.get("params") or {}
    return (cells.get("model") == "etr_risk" and time_course_enabled(p)
            and bool(p.get("temperature_variable")))


def build_clock(p: Mapping, time, *, read_variable: Callable | None, n_cells: int,
                state: Mapping | None = None) -> DegradationClock:
    """Return the degradation clock of a run: constant, or from the pre-pass `state`.

    Without `state` and with a temperature variable, the pre-pass runs here from the
    series' start (what the ``degradation_state`` rule does once for all shards).
    """
    days = label_days(time.labels, time.calendar)
    app_days = np.array([a[0] for a in applications(p, time.calendar)])
    name = p.get("temperature_variable")
    if not name:
        return DegradationClock.constant(days, app_days)
    if read_variable is None:
        raise NcreelError(f"cell model 'etr_risk': no reader for temperature variable '{name}'")
    factor = factor_reader(read_variable, name, units=p["temperature_units"],
                           ea_kj_mol=p["ea_kj_mol"], reference_c=p["reference_temperature_c"],
                           n_cells=n_cells)
    if state is None:
        state = degradation_prepass(factor, days, app_days, [0], n_cells=n_cells)
    tau, n_s = state["tau"], len(state["steps"])
    return DegradationClock(days=days, app_days=app_days, factor=factor,
                            checkpoints={s: tau[r] for r, s in enumerate(state["steps"])},
                            app_tau=np.asarray(tau[n_s:n_s + len(app_days)]),
                            last_tau=np.asarray(tau[-1]))


def _cells_view(a: np.ndarray, cell: np.ndarray) -> np.ndarray:
    """Per-row values of a per-cell array of width n_cells or 1 (broadcast)."""
    if a.shape[-1] > 1:
        return a[..., cell]
    return np.broadcast_to(a[..., :1], a.shape[:-1] + cell.shape)


def time_course(*, p: Mapping, clock: DegradationClock, pec0: np.ndarray, t0: int, n_t: int,
                t_local: np.ndarray, cell: np.ndarray, app_labels: Sequence[str]) -> dict:
    """Time-course columns of one block's rows (see :func:`time_course_columns`).

    Parameters
    ----------
    p : mapping
        ``cells.params`` of etr_risk (defaults applied).
    clock : DegradationClock
    pec0 : numpy.ndarray, shape (n_app, n_cells) or (n_app, 1), mg/kg
        Initial PEC of each application in each cell.
    t0, n_t : int
        The block's global steps ``t0 : t0 + n_t``.
    t_local, cell : numpy.ndarray, shape (n_rows,)
        Local step and flat cell of each row.
    app_labels : sequence of str
        ISO labels of the applications (for ``pec_season_max_time``).

    Returns
    -------
    dict of str to array, each of length n_rows

    Notes
    -----
    ``pec_act`` is exact for step-wise temperature. The TWA uses, per application, the
    mean rate since that application, ``k (τ(t) − τ_j) / (t − t_j)``, which is exact for
    constant temperature and an approximation otherwise.
    ``pec_season_max`` is the largest PEC at any instant of the series: PEC only falls
    between applications, so it is the largest of the PECs just after each application,
    computed per cell from ``τ`` at the applications (no shard needs another's rows).
    """
    import polars as pl

    k = first_order_rate_per_day(p.get("dt50_days"))
    # Computed on the block's grid, (n_t, n_cells), or (n_t, 1) where nothing varies per
    # cell (no temperature, constant interception), then gathered into rows once.
    days = clock.days[t0:t0 + n_t][:, None]
    tau = clock.tau(t0, n_t)

    def rows(a: np.ndarray) -> np.ndarray:
        a = np.asarray(a)
        return a[t_local, cell] if a.shape[1] > 1 else a[t_local, 0]

    out: dict = {}
    out["days_since_first_application_d"] = rows(days - clock.app_days[0])
    pec_act = np.zeros((n_t, 1))
    twa = {w: np.zeros((n_t, 1)) for w in [*p["twa_windows_days"], p["long_term_twa_days"]]}
    for j, d_app in enumerate(clock.app_days):
        age = days - d_app
        dtau = tau - clock.app_tau[j][None, :]
        c0 = pec0[j][None, :]
        with np.errstate(invalid="ignore", over="ignore"):
            pec_act = pec_act + np.where(age >= 0, c0 * np.exp(-k * dtau), 0.0)
            k_eff = np.where(age > 0, k * dtau / np.where(age > 0, age, 1.0), k)
        for w in twa:
            twa[w] = twa[w] + c0 * np.where(age > 0, twa_window(1.0, k_eff, age, w), 0.0)
    out["pec_act_mg_kg"] = pec_act = rows(pec_act)
    for w in p["twa_windows_days"]:
        out[f"pec_twa_{window_name(w)}d_mg_kg"] = rows(twa[w])
    per_cell = clock.cache.get("per_cell")
    if per_cell is None:
        per_cell = clock.cache["per_cell"] = _per_cell(p, clock, pec0, k)
    smax, sidx, plat = per_cell
    out["pec_season_max_mg_kg"] = _cells_view(smax, cell)
    labels = pl.Series("t", [*app_labels, None], dtype=pl.Utf8)
    out["pec_season_max_time"] = labels.gather(_cells_view(sidx, cell))
    if plat is not None:
        out["pec_plateau_mg_kg"] = _cells_view(plat, cell)
        out["pec_max_mg_kg"] = out["pec_plateau_mg_kg"] + out["pec_season_max_mg_kg"]
    etr_a = pec_act / p["ec50_mg_kg"]
    etr_l = rows(twa[p["long_term_twa_days"]]) / p["noec_mg_kg"]
    out["etr_acute"], out["etr_acute_exceeded"] = etr_a, _flag(etr_a, p["trigger_etr_acute"])
    out["etr_long_term"] = etr_l
    out["etr_long_term_exceeded"] = _flag(etr_l, p["trigger_etr_long_term"])
    if clock.factor is not None:
        a, b, f = clock.cache["factor"]  # what clock.tau just read for this block
        if (a, b) != (t0, t0 + n_t):
            f = clock.factor(t0, t0 + n_t)
        out["degradation_rate_factor"] = f[t_local, cell]
    return out


def _flag(etr: np.ndarray, trigger: float):
    import polars as pl

    return pl.select(pl.when(pl.Series(np.isnan(etr))).then(None)
                     .otherwise(pl.Series(etr > trigger))).to_series()


def _per_cell(p: Mapping, clock: DegradationClock, pec0: np.ndarray, k: float):
    """Season maximum (value, application index; NaN/len where unknown) and plateau."""
    app_tau, n_app = clock.app_tau, len(clock.app_days)
    width = max(app_tau.shape[1], pec0.shape[1])
    after = np.empty((n_app, width))
    for j in range(n_app):
        # PEC just after application j: every dose so far, decayed to τ_j.
        with np.errstate(invalid="ignore", over="ignore"):
            after[j] = sum(pec0[i] * np.exp(-k * (app_tau[j] - app_tau[i])) for i in range(j + 1))
    unknown = np.isnan(after).any(axis=0)
    idx = np.where(unknown, n_app, np.argmax(np.where(np.isnan(after), -np.inf, after), axis=0))
    smax = np.where(unknown, np.nan, after.max(axis=0))
    plat = None
    if p.get("plateau_years") is not None:
        plat = plateau(pec0.sum(axis=0), k * clock.mean_factor(), year_days=p["year_days"],
                       n_years=float(p["plateau_years"]),
                       application_depth_m=p["assumed_depth_m"],
                       tillage_depth_m=p["tillage_depth_m"])
        plat = np.broadcast_to(plat, (width,))
    return smax, idx, plat
