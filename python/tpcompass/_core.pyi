"""The compass application, run in-process (see tpcompass for the Python API)."""

version: str

def run(args: list[str]) -> tuple[int, str, str]:
    """Runs ``compass <args...>`` in this process; returns (exit code, stdout, stderr).

    >>> from tpcompass import _core
    >>> rc, out, err = _core.run(["list", "presets", "--json"])
    >>> rc
    0
    """
