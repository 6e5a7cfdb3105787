"""Run a scheduler command for its output, with the standard library only.

The PBS Pro executor plugin's helper (``snakemake_executor_plugin_pbs_pro.cancel``, which
needs only the standard library too), for the Slurm and PBS checks here alike.
"""

from __future__ import annotations

from snakemake_executor_plugin_pbs_pro.cancel import stdout_of

__all__ = ["stdout_of"]
