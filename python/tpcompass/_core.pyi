"""The compass application, run in-process (see tpcompass for the Python API)."""

from typing import Callable, Optional

version: str
#: True for the planning build (pip install . by default): no simulator, executor, MPI or CUDA.
planning_only: bool

def run(args: list[str], on_progress: Optional[Callable[[str], None]] = None) -> tuple[int, str, str]:
    """Runs ``compass <args...>`` in this process; returns (exit code, stdout, stderr).

    The run's output stays in memory: it never reaches the process's descriptors 1 and 2, so
    what Python prints meanwhile cannot mix with it. With ``on_progress``, every
    ``compass: progress: `` line the run writes to stderr is passed to it (without that prefix)
    on the calling thread as it is written, and left out of the returned stderr; an exception it
    raises is raised when the run ends.

    >>> from tpcompass import _core
    >>> rc, out, err = _core.run(["list", "presets", "--json"])
    >>> rc
    0
    """
