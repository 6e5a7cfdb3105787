"""PostgreSQL side of the cell table: COPY text, the load script, the reduce and load steps.

Owns: :mod:`.types` (every PostgreSQL type ncreel decides: values, time, geometry),
:mod:`.copytext` (COPY text encoding of rows, joining shard files, the DDL and ``\\copy``
script), :mod:`.reduce` (the reduce rule: one COPY file for
the run) and :mod:`.load` (the load rule: stream that file into PostgreSQL with psycopg).

May import: the standard library, numpy, polars, zstandard and psycopg (each where it is
used, inside the function, so the reduce job stays light), :mod:`ncreel.core` and
:mod:`ncreel.config`. Not :mod:`ncreel.input` nor :mod:`ncreel.cells` (the models declare
their columns; this package only encodes them), nor the render code.
"""
