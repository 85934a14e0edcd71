"""The compass application, run in-process (see tpcompass for the Python API)."""

from typing import Callable, Optional

version: str

def run(args: list[str], on_progress: Optional[Callable[[str], None]] = None) -> tuple[int, str, str]:
    """Runs ``compass <args...>`` in this process; returns (exit code, stdout, stderr).

    With ``on_progress``, every ``compass: progress: `` line the run writes to stderr is passed
    to it (without that prefix) as it is written, and left out of the returned stderr.

    >>> from tpcompass import _core
    >>> rc, out, err = _core.run(["list", "presets", "--json"])
    >>> rc
    0
    """
