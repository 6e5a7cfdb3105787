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

This ``__init__`` is the public API (``__all__``) for workflows and model authors. The
package owns the cell models and what they produce: :mod:`.context` (the contract),
:mod:`.registry` (models by name, column checks), :mod:`.field` and :mod:`.etr` (the
built-in models; :mod:`.soil` is the soil fate behind ``etr_risk``), :mod:`.geometry` (cell
polygons) and :mod:`.rows` (one shard's rows, the table's columns, the ``cells`` settings).

May import: the standard library, numpy, cftime, polars, :mod:`ncreel.core`,
:mod:`ncreel.config`, :mod:`ncreel.input` and :mod:`ncreel.pg` (to encode rows as COPY
text). Not regions, the render code, the report or the cluster code.
"""

from ncreel.cells.context import GEOMETRY_COLUMN, RUN_COLUMN, CellContext, cell_model
from ncreel.cells.etr import (
    ETR_DEFAULTS,
    RISK_CLASSES,
    etr_columns,
    etr_risk_model,
    pec_soil,
    risk_level,
)
from ncreel.cells.field import field_columns, field_model
from ncreel.cells.geometry import CellGeometry, bounds_1d, corners_2d, corners_from_centres
from ncreel.cells.registry import (
    BUILTIN_MODELS,
    ResolvedModel,
    check_columns,
    check_declaration,
    resolve_model,
)
from ncreel.cells.rows import (
    ShardRows,
    cells_settings,
    series_columns,
    table_columns,
    upgrade_cells_config,
)

__all__ = [
    "BUILTIN_MODELS",
    "CellContext",
    "CellGeometry",
    "ETR_DEFAULTS",
    "GEOMETRY_COLUMN",
    "RISK_CLASSES",
    "RUN_COLUMN",
    "ResolvedModel",
    "ShardRows",
    "bounds_1d",
    "cell_model",
    "cells_settings",
    "check_columns",
    "check_declaration",
    "corners_2d",
    "corners_from_centres",
    "etr_columns",
    "etr_risk_model",
    "field_columns",
    "field_model",
    "pec_soil",
    "resolve_model",
    "risk_level",
    "series_columns",
    "table_columns",
    "upgrade_cells_config",
]
