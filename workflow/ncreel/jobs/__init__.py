"""What the Snakefile and each job call from end to end.

Owns: :mod:`.runconfig` (``load_config`` and ``start_run``, called by
``workflow/rules/common.smk``: every check before any job), :mod:`.shard` (one shard job:
its frames and its per-cell rows), :mod:`.stats` (the statistics pass: colour limits,
anomaly baseline) and :mod:`.preflight` (``ncreel inspect``: what a run would make of a
file, before any job).

The top layer: may import every other folder.
"""
