"""tpcompass: Compass for Python.

Plans how to overlap tensor-parallel GEMMs with their collectives, predicts and simulates the
strategies, and exports the plan to TransformerEngine/Megatron-LM. The functions take the
command line's flags as keyword arguments, with the same defaults and the same errors.

>>> import tpcompass
>>> tpcompass.plan().speedup > 1
True
"""

from ._api import (CompassError, Plan, Sweep, TeExport, backend, export_te, models, op, plan,
                   plot, presets, profile_dump, profile_load, run, search, simulate, sweep,
                   topo)

__all__ = ["CompassError", "Plan", "Sweep", "TeExport", "backend", "export_te", "models", "op",
           "plan", "plot", "presets", "profile_dump", "profile_load", "run", "search", "simulate", "sweep",
           "topo"]
__version__ = "0.1.0"
