"""The Python API of Compass.

Every function runs the compass application (in-process through the native module, or the
``compass`` binary named by ``COMPASS_CLI`` when the module is not built) with the same flags
the command line takes, asks for ``--json`` and returns plain Python objects. Arguments left at
``None`` are not passed, so the defaults are exactly the CLI's; bad input raises
:class:`CompassError` carrying the CLI's one-line message.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Optional, Sequence, Union

if TYPE_CHECKING:  # matplotlib is needed by plot() only (the "plot" extra)
    from matplotlib.figure import Figure

try:  # the native module, built by `pip install .`
    from . import _core  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover - depends on how the package was installed
    _core = None

_ERROR_PREFIX = "compass: error: "


class CompassError(ValueError):
    """Bad input or a failed run: the message is the CLI's one line (without its prefix).

    >>> import tpcompass
    >>> try:
    ...     tpcompass.plan(tp=16)
    ... except tpcompass.CompassError as e:
    ...     print(e, e.exit_code)
    --tp 16 exceeds the 8 GPUs of 'a6000x8' 2
    """

    def __init__(self, message: str, exit_code: int = 2):
        super().__init__(message)
        self.exit_code = exit_code


def backend() -> str:
    """Which runner the API uses: ``"native"`` (the built module) or the binary's path.

    >>> import tpcompass
    >>> tpcompass.backend() in ("native",) or tpcompass.backend().endswith("compass")
    True
    """
    if _core is not None and not os.environ.get("COMPASS_CLI"):
        return "native"
    return _binary()


def _binary() -> str:
    path = os.environ.get("COMPASS_CLI") or shutil.which("compass")
    if not path:
        raise CompassError(
            "tpcompass: the native module is not built and no compass binary was found "
            "(pip install . builds the module; or set COMPASS_CLI to build/release/compass)")
    return path


_PROGRESS_PREFIX = "compass: progress: "

#: Verbs the planning build (the default of ``pip install .``) cannot run at all.
_FULL_BUILD_VERBS = ("run", "simulate", "validate")
#: How a build says that a part is left out ("this build has no simulator", "... no BLAS").
_NOT_IN_BUILD = "this build has no "


def _planning_only() -> bool:
    """True when the native module is the planning build (no simulator, executor or MPI)."""
    return _core is not None and bool(getattr(_core, "planning_only", False))


def _full_binary(args: Sequence[str]) -> str:
    """The compass binary that runs what the planning build leaves out, or CompassError."""
    path = shutil.which("compass")
    if path:
        return path
    verb = args[0] if args else "this call"
    raise CompassError(
        f"{verb}: the tpcompass planning build has no simulator or executor; build the full "
        "package (pip install . -C cmake.define.COMPASS_PLANNING_ONLY=OFF) or put a compass "
        "binary on PATH (tools/setup.sh builds build/release/compass)")

#: ``progress=`` of the long calls: None (a bar when stderr is a terminal or in a notebook),
#: True (always a bar), False (none), or a function called with (label, done, total) at every
#: step; the function may print (its output never mixes with the result).
ProgressArg = Union[None, bool, Callable[[str, int, int], None]]


def _parse_progress(text: str) -> Optional[tuple[str, int, int]]:
    """``LABEL DONE/TOTAL`` or ``LABEL PERCENT%`` (a progress line without its prefix)."""
    label, _, amount = text.rpartition(" ")
    try:
        if amount.endswith("%"):
            return label, int(amount[:-1]), 100
        done, _, total = amount.partition("/")
        return label, int(done), int(total)
    except ValueError:
        return None


class _Bars:
    """tqdm bars, one per label, as a long call reports its steps: text on stderr in a
    terminal, a widget in a notebook (tqdm.auto picks)."""

    def __init__(self) -> None:
        self._bar: Any = None
        self._label = ""

    def __call__(self, label: str, done: int, total: int) -> None:
        from tqdm.auto import tqdm  # a dependency of the package (pyproject.toml)

        if self._bar is None or label != self._label:
            self.close()
            self._bar = tqdm(total=total, desc=label)
            self._label = label
        self._bar.update(done - self._bar.n)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None


def _in_notebook() -> bool:
    """True inside a Jupyter kernel (IPython's ZMQ shell), where bars are widgets."""
    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython is not None else None  # type: ignore[attr-defined]
    return type(shell).__name__ == "ZMQInteractiveShell"


def _progress_sink(progress: ProgressArg) -> Optional[Callable[[str, int, int], None]]:
    if callable(progress):
        return progress
    if progress is None:
        progress = (sys.stderr is not None and sys.stderr.isatty()) or _in_notebook()
    return _Bars() if progress else None


def run(args: Sequence[str], progress: ProgressArg = False) -> str:
    """Runs ``compass <args...>`` and returns its stdout; raises CompassError on failure.

    ``progress`` (for verbs that take ``--progress``): None shows a bar when stderr is a
    terminal, True always, False never; a function is called with (label, done, total).

    >>> import tpcompass
    >>> "a6000x8" in tpcompass.run(["list", "presets"])
    True
    >>> steps = []
    >>> _ = tpcompass.run(["sweep", "--limit", "2"], progress=lambda *s: steps.append(s))
    >>> steps
    [('planning', 1, 2), ('planning', 2, 2)]
    """
    args = [str(a) for a in args]
    sink = _progress_sink(progress)
    if sink is not None:
        args += ["--progress", "lines"]

    def on_line(text: str) -> None:
        step = _parse_progress(text)
        if step is not None and sink is not None:
            sink(*step)

    try:
        native = backend() == "native"
        if native and _planning_only() and args and args[0] in _FULL_BUILD_VERBS:
            native = False
            _full_binary(args)  # raises when there is no compass binary to run it
        if native:  # the in-process run reads os.environ through getenv
            rc, out, err = _core.run(args, on_line if sink is not None else None)
            if rc != 0 and _planning_only() and _NOT_IN_BUILD in err:
                native = False
                _full_binary(args)
        if not native:
            binary = _full_binary(args) if backend() == "native" else _binary()
            if sink is None:
                proc = subprocess.run([binary, *args], capture_output=True, text=True,
                                      check=False)
                rc, out, err = proc.returncode, proc.stdout, proc.stderr
            else:
                rc, out, err = _run_streaming([binary, *args], on_line)
    finally:
        if isinstance(sink, _Bars):
            sink.close()
    if rc != 0:
        lines = [l for l in err.splitlines() if l.strip()]
        message = lines[-1] if lines else f"compass exited with code {rc}"
        if message.startswith(_ERROR_PREFIX):
            message = message[len(_ERROR_PREFIX):]
        elif message.startswith("compass: "):
            message = message[len("compass: "):]
        raise CompassError(message, rc)
    return out


def _run_streaming(argv: list[str], on_line: Callable[[str], None]) -> tuple[int, str, str]:
    """Runs the binary, passing its progress lines to on_line as they come. An exception
    on_line raises skips its later calls and is raised when the run ends (as in the native
    module)."""
    with tempfile.TemporaryFile(mode="w+") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.PIPE, text=True)
        err = []
        failure: Optional[Exception] = None
        assert proc.stderr is not None
        for line in proc.stderr:
            if not line.startswith(_PROGRESS_PREFIX):
                err.append(line)
            elif failure is None:
                try:
                    on_line(line[len(_PROGRESS_PREFIX):].rstrip("\n"))
                except Exception as e:  # noqa: BLE001 - raised below, after the run
                    failure = e
        rc = proc.wait()
        if failure is not None:
            raise failure
        out.seek(0)
        return rc, out.read(), "".join(err)


def _json(args: Sequence[str], progress: ProgressArg = False) -> Any:
    return json.loads(run([*args, "--json"], progress=progress))


def _flags(**kwargs: Any) -> list[str]:
    """--name value for every argument that is not None (True flags without a value)."""
    out: list[str] = []
    for name, value in kwargs.items():
        if value is None or value is False:
            continue
        flag = "--" + name.replace("_", "-")
        if value is True:
            out.append(flag)
        elif isinstance(value, (list, tuple)):
            out += [flag, ",".join(str(v) for v in value)]
        else:
            out += [flag, str(value)]
    return out


def _records(rows: list[dict]) -> list[dict]:
    """Flattens nested dicts into dotted keys (one level per nesting), for pandas."""
    flat = []
    for row in rows:
        out: dict = {}

        def put(prefix: str, value: Any) -> None:
            if isinstance(value, dict):
                for k, v in value.items():
                    put(f"{prefix}.{k}" if prefix else k, v)
            else:
                out[prefix] = value

        put("", row)
        flat.append(out)
    return flat


# ----------------------------------------------------------------------------- results


@dataclass(frozen=True)
class Plan:
    """A layer plan: every TP operator, the choice per operator, and the iteration estimate
    of Megatron-LM, TransformerEngine's defaults and Compass side by side."""

    profile: str
    model: str
    tp: int
    seq: int
    micro_batch: int
    sequence_parallel: bool
    speedup: float  #: Compass over Megatron-LM (iteration estimate)
    speedup_over_te: float  #: Compass over TransformerEngine's defaults
    ops: list = field(repr=False)
    data: dict = field(repr=False)  #: the full JSON document of ``compass plan --json``

    def records(self) -> list[dict]:
        """One flat dict per operator (role, shape, choice, every strategy's time), e.g.
        ``pandas.DataFrame(plan.records())``.

        >>> import tpcompass
        >>> r = tpcompass.plan().records()
        >>> len(r), r[0]["role"], r[0]["sequential_s"] >= r[0]["megatron_s"] - 1e-12
        (10, 'qkv_fprop', True)
        """
        rows = []
        for o in self.ops:
            r = {"role": o["op"]["role"], "pass": o["pass"], "kind": o["op"]["kind"],
                 "m": o["op"]["m"], "n": o["op"]["n"], "k": o["op"]["k"], "tp": o["op"]["tp"],
                 "choice": o["choice"], "megatron_s": o["megatron"]["total_s"],
                 "te_default_s": o["te_default"]["total_s"]}
            for e in o["estimates"]:
                name = "decompose:d*" if e["strategy"].startswith("decompose") else e["strategy"]
                r[f"{name}_s"] = e["total_s"]
            rows.append(r)
        return rows


@dataclass(frozen=True)
class Sweep:
    """Every configuration of a grid with every strategy's prediction, and the summary."""

    profile: str
    rows: list = field(repr=False)
    summary: dict = field(repr=False)

    def records(self) -> list[dict]:
        """One flat dict per configuration (``op.m``, ``times_s.fuse:ring``, ...), e.g.
        ``pandas.DataFrame(sweep.records())``.

        >>> import tpcompass
        >>> r = tpcompass.sweep(limit=2).records()
        >>> len(r), "times_s.sequential" in r[0]
        (2, True)
        """
        return _records(self.rows)


@dataclass(frozen=True)
class TeExport:
    """TransformerEngine's overlap configuration and Megatron-LM's launch settings."""

    config: dict  #: what --tp-comm-overlap-cfg reads: TE layer name -> settings
    env: dict  #: environment variables (CUDA_DEVICE_MAX_CONNECTIONS, CUDA_VISIBLE_DEVICES, ...)
    megatron_args: list
    device_order: list
    layers: list = field(repr=False)  #: per operator: Compass, exported and TE-default times
    data: dict = field(repr=False)

    def records(self) -> list[dict]:
        """One flat dict per operator: Compass's choice, the exported TE setting and TE's
        defaults, each with its predicted time, e.g. ``pandas.DataFrame(export.records())``.

        >>> import tpcompass
        >>> r = tpcompass.export_te().records()
        >>> r[0]["role"], {"compass_s", "exported_s", "te_default_s"} <= set(r[0])
        ('qkv_fprop', True)
        """
        return [dict(l) for l in self.layers]

    def write(self, out: str, fmt: str = "yaml", force: bool = False) -> None:
        """Writes the configuration and launch script like ``compass export te --out``
        (``out`` ending in ``/``: a directory; else the configuration file's name); never
        overwrites without ``force``.

        >>> import tpcompass, tempfile, os
        >>> d = tempfile.mkdtemp()
        >>> tpcompass.export_te().write(d + "/")
        >>> sorted(os.listdir(d))
        ['launch.sh', 'tp_comm_overlap.yaml']
        """
        args = ["export", "te", *self._plan_args, "--format", fmt, "--out", out]
        if force:
            args.append("--force")
        run(args)

    _plan_args: tuple = field(default=(), repr=False)


# ----------------------------------------------------------------------------- functions


ProfileArg = Optional[str]
Gpus = Optional[Sequence[int]]


def presets() -> list[dict]:
    """The built-in machines.

    >>> import tpcompass
    >>> [p["name"] for p in tpcompass.presets()][:2]
    ['a6000x8', 'a6000x4']
    """
    return _json(["list", "presets"])


def models() -> list[dict]:
    """The built-in models (hidden, ffn, heads, ...).

    >>> import tpcompass
    >>> any(m["name"] == "llama2-13b" for m in tpcompass.models())
    True
    """
    return _json(["list", "models"])


def profile_load(profile: str) -> dict:
    """A machine profile (preset name or JSON file), validated, as a dict.

    >>> import tpcompass
    >>> tpcompass.profile_load("a6000x8")["name"]
    'a6000x8'
    """
    return json.loads(run(["profile", "dump", profile]))


def profile_dump(profile: Union[str, dict], path: str, force: bool = False) -> None:
    """Writes a profile (preset name, file, or a dict in the profile format) to ``path`` as
    canonical JSON, validating it first; never overwrites without ``force``.

    >>> import tpcompass, tempfile, os
    >>> d = tempfile.mkdtemp(); tpcompass.profile_dump("a6000x4", os.path.join(d, "m.json"))
    """
    if isinstance(profile, dict):
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
            json.dump(profile, f)
            src = f.name
        try:
            run(["profile", "dump", src, "--out", path, *(["--force"] if force else [])])
        finally:
            os.unlink(src)
    else:
        run(["profile", "dump", profile, "--out", path, *(["--force"] if force else [])])


def _plan_args(profile, model, tp, gpus, seq, mbs, sp) -> list[str]:
    return _flags(profile=profile, model=model, tp=tp, gpus=gpus, seq=seq, mbs=mbs,
                  no_sp=(sp is False))


def plan(profile: ProfileArg = None, model: Optional[str] = None, tp: Optional[int] = None,
         gpus: Gpus = None, seq: Optional[int] = None, mbs: Optional[int] = None,
         sp: bool = True) -> Plan:
    """Plans every TP operator of one layer (defaults: llama2-13b on a6000x8, tp 8, seq 4096).

    >>> import tpcompass
    >>> p = tpcompass.plan()
    >>> p.speedup > 1
    True
    """
    j = _json(["plan", *_plan_args(profile, model, tp, gpus, seq, mbs, sp)])
    return Plan(profile=j["profile"], model=j["model"], tp=j["tp"], seq=j["seq"],
                micro_batch=j["micro_batch"], sequence_parallel=j["sequence_parallel"],
                speedup=j["speedup"]["compass_over_megatron"],
                speedup_over_te=j["speedup"]["compass_over_te_default"], ops=j["ops"], data=j)


def op(op: str, m: int, n: int, k: int, tp: int, dtype: Optional[str] = None,
       profile: ProfileArg = None, gpus: Gpus = None) -> dict:
    """Every strategy's prediction for one operator, the ODP result and the choice.

    >>> import tpcompass
    >>> r = tpcompass.op("gemm_rs", m=8192, n=5120, k=13824, tp=8)
    >>> r["choice"] in [e["strategy"] for e in r["estimates"]]
    True
    """
    return _json(["op", *_flags(op=op, m=m, n=n, k=k, tp=tp, dtype=dtype, profile=profile,
                                gpus=gpus)])


def sweep(profile: ProfileArg = None, grid: Optional[str] = None, limit: Optional[int] = None,
          stride: Optional[int] = None, gpus: Gpus = None, sim: bool = False,
          progress: ProgressArg = None) -> Sweep:
    """The paper's grid (or a subset: ``limit`` rows, every ``stride``-th). ``progress``: None
    draws a tqdm bar per phase (planning, simulating) when stderr is a terminal, True always,
    False never; a function is called with (label, done, total) after every row.

    >>> import tpcompass
    >>> s = tpcompass.sweep(limit=4)
    >>> len(s.rows)
    4
    >>> seen = []
    >>> _ = tpcompass.sweep(limit=3, progress=lambda label, done, total: seen.append(done))
    >>> seen
    [1, 2, 3]
    """
    j = _json(["sweep", *_flags(profile=profile, grid=grid, limit=limit, stride=stride,
                                gpus=gpus, sim=sim)], progress=progress)
    return Sweep(profile=j["profile"], rows=j["rows"], summary=j["summary"])


def simulate(op: str, m: int, n: int, k: int, tp: Optional[int] = None, gpus: Gpus = None,
             strategy: Optional[str] = None, dtype: Optional[str] = None,
             profile: ProfileArg = None) -> Any:
    """Simulates one operator on SimGrid (needs a build with the simulator: the planning
    package runs it on a ``compass`` binary on PATH, or says how to get one).

    >>> import tpcompass
    >>> try:
    ...     r = tpcompass.simulate("ag_gemm", m=1024, n=512, k=256, tp=2, strategy="sequential")
    ... except tpcompass.CompassError as e:
    ...     r = {"refused": "planning build" in str(e)}
    >>> isinstance(r, (dict, list)) and r != {"refused": False}
    True
    """
    return _json(["simulate", *_flags(op=op, m=m, n=n, k=k, tp=tp, gpus=gpus,
                                      strategy=strategy, dtype=dtype, profile=profile)])


def topo(profile: ProfileArg = None, tp: Optional[int] = None, gpus: Gpus = None,
         size: Optional[int] = None) -> dict:
    """A machine's devices and links, its rings and each all-gather pattern's time.

    >>> import tpcompass
    >>> "ring" in str(tpcompass.topo("a6000x8", tp=4))
    True
    """
    return _json(["topo", *_flags(profile=profile, tp=tp, gpus=gpus, size=size)])


def export_te(profile: ProfileArg = None, model: Optional[str] = None, tp: Optional[int] = None,
              gpus: Gpus = None, seq: Optional[int] = None, mbs: Optional[int] = None,
              sp: bool = True, fp8: bool = False, atomic_gemm: bool = False,
              cluster: Optional[str] = None) -> TeExport:
    """TransformerEngine's tp-comm-overlap configuration and Megatron-LM's launch settings
    for the plan of one layer (docs/te-export.md). ``cluster`` plans on a cluster's node
    instead of ``profile``, as :func:`search` takes it.

    >>> import tpcompass
    >>> e = tpcompass.export_te()
    >>> e.env["CUDA_DEVICE_MAX_CONNECTIONS"]
    '1'
    """
    plan_args = [*_plan_args(profile, model, tp, gpus, seq, mbs, sp),
                 *_flags(fp8=fp8, atomic_gemm=atomic_gemm, cluster=cluster)]
    j = _json(["export", "te", *plan_args])
    return TeExport(config=j["config"], env=j["env"], megatron_args=j["megatron_args"],
                    device_order=j["device_order"], layers=j["layers"], data=j,
                    _plan_args=tuple(plan_args))


def plot(data: Union[str, dict, "Plan", "Sweep"], out: Optional[str] = None,
         force: bool = False) -> "Figure":
    """Draws a plan, a sweep or a simulation trace (``compass simulate --trace``) and returns
    the matplotlib Figure, which a notebook shows as a cell's value. ``data`` is a result of
    :func:`plan` or :func:`sweep`, a parsed JSON document, or the path of one. With ``out`` the
    figure is also saved there (the format from the name's extension), never over an existing
    file without ``force``. Needs matplotlib (``pip install tpcompass[plot]``).

    >>> import tpcompass
    >>> fig = tpcompass.plot(tpcompass.plan())
    >>> type(fig).__name__, fig.axes[0].get_ylabel()
    ('Figure', 'predicted time per operator (ms)')
    """
    if isinstance(data, Plan):
        data = data.data
    elif isinstance(data, Sweep):
        data = {"profile": data.profile, "rows": data.rows, "summary": data.summary}
    elif isinstance(data, str):
        try:
            with open(data) as f:
                data = json.load(f)
        except (OSError, ValueError) as e:
            raise CompassError(f"{data}: {e}") from None
    from . import plots

    try:
        plots.kind_of(data)
    except ValueError as e:
        raise CompassError(str(e)) from None
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise CompassError("plot needs matplotlib (pip install matplotlib, or tpcompass[plot]; "
                           "Debian: apt install python3-matplotlib)") from None
    fig = plots.figure(data)
    if out is not None:
        if os.path.exists(out) and not force:
            raise CompassError(f"'{out}' exists (force=True overwrites it, like the CLI's --force)")
        fig.savefig(out, dpi=120)
    return fig


def search(model: Optional[str] = None, cluster: Optional[str] = None, gpus: Optional[int] = None,
           global_batch: Optional[int] = None, seq: Optional[int] = None, top: int = 5,
           **fixed: Any) -> "Any":
    """Training layouts of a model on a cluster, best first, as a pandas DataFrame: one row per
    layout and TP overlap setting (``overlap`` is megatron, te-default or compass, and launch:
    the printed Megatron-LM launch, by which the layouts are ranked) with the
    iteration time, tokens/s/GPU, MFU, the breakdown and the memory peak. ``fixed`` takes the
    other flags of ``compass search`` (``tp=8``, ``pp=4``, ``recompute="selective"``,
    ``sp="on"``, ``fp8=True``, ...). The whole JSON result is in ``df.attrs["search"]``.

    >>> import tpcompass
    >>> df = tpcompass.search(model="llama2-7b", gpus=16, global_batch=64, seq=2048, top=2)
    >>> len(df), sorted(set(df["overlap"]))
    (8, ['compass', 'launch', 'megatron', 'te-default'])
    """
    import pandas  # only this function needs it

    j = _json(["search", *_flags(model=model, cluster=cluster, gpus=gpus,
                                 global_batch=global_batch, seq=seq, top=top, **fixed)])
    rows = []
    for rank, cand in enumerate(j["top"], start=1):
        for overlap in ("megatron", "te-default", "compass", "launch"):
            row = {"rank": rank, "layout": cand["describe"], "overlap": overlap, **cand["layout"]}
            row.update(_records([cand[overlap]])[0])
            rows.append(row)
    df = pandas.DataFrame(rows)
    df.attrs["search"] = j
    return df
