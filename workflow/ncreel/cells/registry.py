"""Cell models by name, and the checks of what they declare and return.

Built-in models are found by config name, a user's as ``package.module:function``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from ncreel.cells.context import GEOMETRY_COLUMN, RUN_COLUMN, CellContext
from ncreel.cells.etr import etr_risk_model
from ncreel.cells.field import field_model
from ncreel.core.errors import NcreelError

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
        Keyword arguments for the model (``cells.params``
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
    from ncreel.core.userimport import import_user_object

    fn = import_user_object(name, "cells.model")
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
    from ncreel.pg.sql import IDENTIFIER

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
