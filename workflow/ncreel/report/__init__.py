"""Pages of the Snakemake report: contact sheet and run plan, resources page, screenshot.

Owns: :mod:`.contactsheet` (a grid of sampled frames and the run plan page),
:mod:`.resourcepage` (declared ``mem_mb``/``runtime`` against measured, per job) and
:mod:`.screenshot` (``python -m ncreel.report.screenshot``: a PNG of a report page, with
headless Chromium, for the documentation).

May import: the standard library, matplotlib (Agg), :mod:`ncreel.core`,
:mod:`ncreel.config`, :mod:`ncreel.run` (job records) and :mod:`ncreel.render` (the movie's
facts). Report pages only read what the rules wrote; they never re-run a model.
"""
