"""The Python API against the command line: same defaults, same errors, plain results.

Runs on whichever backend tpcompass picks (the native module after `pip install .`, or the
compass binary named by COMPASS_CLI, as CTest sets it)."""

import json
import os
import subprocess
import sys

import pytest

import tpcompass


def cli_json(*args):
    """The CLI's own JSON for the same question (through tpcompass.run, no parsing of ours)."""
    return json.loads(tpcompass.run([*args, "--json"]))


def test_plan_defaults_match_cli():
    p = tpcompass.plan()
    j = cli_json("plan")
    assert (p.profile, p.model, p.tp, p.seq, p.micro_batch) == ("a6000x8", "llama2-13b", 8, 4096, 1)
    assert p.speedup == j["speedup"]["compass_over_megatron"]
    assert p.speedup > 1.0
    assert p.speedup_over_te == j["speedup"]["compass_over_te_default"]
    assert len(p.records()) == len(j["ops"]) == 10
    rec = p.records()[0]
    assert {"role", "choice", "megatron_s", "te_default_s", "sequential_s"} <= set(rec)


def test_plan_arguments_and_gpus():
    p = tpcompass.plan(model="llama2-7b", gpus=[0, 1, 4, 5], seq=2048)
    assert p.tp == 4 and p.seq == 2048 and p.model == "llama2-7b"
    q = tpcompass.plan(model="gpt3-6.7b", tp=4, seq=2048, sp=False)
    assert not q.sequence_parallel


def test_errors_are_the_cli_message():
    with pytest.raises(tpcompass.CompassError) as e:
        tpcompass.plan(tp=16)
    assert str(e.value) == "--tp 16 exceeds the 8 GPUs of 'a6000x8'"
    assert e.value.exit_code == 2
    with pytest.raises(tpcompass.CompassError, match="unknown preset|no such|profile"):
        tpcompass.plan(profile="no-such-machine")
    with pytest.raises(tpcompass.CompassError, match="sequence parallelism"):
        tpcompass.export_te(sp=False)
    with pytest.raises(tpcompass.CompassError, match="needs FP8"):
        tpcompass.export_te(atomic_gemm=True)


def test_op_and_sweep():
    r = tpcompass.op("gemm_rs", m=8192, n=5120, k=13824, tp=8)
    assert r == cli_json("op", "--op", "gemm_rs", "--m", "8192", "--n", "5120", "--k", "13824",
                         "--tp", "8")
    s = tpcompass.sweep(limit=5)
    assert len(s.rows) == 5 and len(s.records()) == 5
    assert "times_s.fuse:ring" in s.records()[0]
    assert sum(s.summary["wins"].values()) == 5


def test_profiles(tmp_path):
    names = [p["name"] for p in tpcompass.presets()]
    assert "a6000x8" in names and "h100x8" in names
    prof = tpcompass.profile_load("a6000x8")
    assert prof["name"] == "a6000x8"
    out = tmp_path / "m.json"
    tpcompass.profile_dump(prof, str(out))
    assert tpcompass.profile_load(str(out)) == prof
    with pytest.raises(tpcompass.CompassError, match="--force"):
        tpcompass.profile_dump("a6000x8", str(out))
    tpcompass.profile_dump("a6000x4", str(out), force=True)
    assert tpcompass.profile_load(str(out))["name"] == "a6000x4"
    assert any(m["name"] == "llama2-70b" for m in tpcompass.models())


def test_topo_and_simulate():
    t = tpcompass.topo("a6000x8", tp=4)
    assert t == cli_json("topo", "a6000x8", "--tp", "4")
    try:
        r = tpcompass.simulate("ag_gemm", m=1024, n=512, k=256, tp=2, strategy="sequential")
    except tpcompass.CompassError as e:  # a build without the simulator says so
        assert "simulator" in str(e)
    else:
        assert r


def test_export_te(tmp_path):
    e = tpcompass.export_te()
    assert e.env["CUDA_DEVICE_MAX_CONNECTIONS"] == "1"
    assert sorted(e.device_order) == list(range(8))
    assert "--tp-comm-overlap" in e.megatron_args
    assert set(e.config) >= {"qkv_fprop", "proj_fprop", "fc1_fprop", "fc2_fprop"}
    assert e.config["qkv_fprop"]["method"] == "ring_exchange"
    assert len(e.records()) == 10
    e.write(str(tmp_path) + "/")
    assert (tmp_path / "tp_comm_overlap.yaml").exists() and (tmp_path / "launch.sh").exists()
    with pytest.raises(tpcompass.CompassError, match="--force"):
        e.write(str(tmp_path) + "/")
    # On a cluster's node, as the search names it: the node's preset's export.
    c = tpcompass.export_te(cluster="dgx-h100", tp=4)
    assert c.data == tpcompass.export_te(profile="h100x8", tp=4).data
    with pytest.raises(tpcompass.CompassError, match="cluster"):
        tpcompass.export_te(cluster="nosuch")


def test_records_convert_to_pandas():
    # tools/setup.sh installs pandas, so this runs (and can fail) in CI rather than skipping.
    import pandas as pd

    plan = tpcompass.plan()
    df = pd.DataFrame(plan.records())
    assert len(df) == 10 and "choice" in df.columns
    assert list(df["role"]) == [o["op"]["role"] for o in plan.ops]
    assert pd.api.types.is_float_dtype(df["sequential_s"]) and (df["sequential_s"] > 0).all()
    # The chosen strategy's time is the smallest of the row's strategy columns.
    times = df[[c for c in df.columns if c.endswith("_s") and c not in ("megatron_s", "te_default_s")]]
    assert (times.min(axis=1) <= df["megatron_s"] + 1e-12).all()

    sweep = tpcompass.sweep(limit=6)
    sdf = pd.DataFrame(sweep.records())
    assert len(sdf) == 6
    assert {"op.m", "op.n", "op.k", "choice", "times_s.sequential", "times_s.fuse:ring"} <= set(sdf.columns)
    assert pd.api.types.is_integer_dtype(sdf["op.m"])
    assert sdf["choice"].value_counts().sum() == sum(sweep.summary["wins"].values()) == 6

    export = tpcompass.export_te()
    edf = pd.DataFrame(export.records())
    assert len(edf) == 10


def test_plot_returns_a_figure(tmp_path):
    plan = tpcompass.plan()
    fig = tpcompass.plot(plan)
    assert type(fig).__name__ == "Figure"
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_xticklabels()] == [o["op"]["role"] for o in plan.ops]
    assert ax.get_ylabel() == "predicted time per operator (ms)"
    sweep = tpcompass.sweep(limit=8)
    sfig = tpcompass.plot(sweep)
    assert sfig.axes[0].get_title() == f"8 configurations on {sweep.profile}"
    assert sfig.axes[0].get_xticklabels()[-1].get_text() == "choice"
    # out= saves the figure too, never over an existing file without force.
    out = tmp_path / "plan.png"
    tpcompass.plot(plan, str(out))
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and out.stat().st_size > 10000
    with pytest.raises(tpcompass.CompassError, match="force"):
        tpcompass.plot(plan, str(out))
    tpcompass.plot(sweep, str(out), force=True)
    # A path is read; a document of another kind is one error line.
    doc = tmp_path / "plan.json"
    doc.write_text(json.dumps(plan.data))
    assert tpcompass.plot(str(doc)).axes[0].get_ylabel() == ax.get_ylabel()
    with pytest.raises(tpcompass.CompassError, match="not a plan, sweep or simulation trace"):
        tpcompass.plot({"something": 1})


def _public_callables():
    """Every function in tpcompass.__all__ and every public method of its result classes."""
    import inspect

    for name in tpcompass.__all__:
        obj = getattr(tpcompass, name)
        yield name, obj
        if inspect.isclass(obj) and not issubclass(obj, Exception):
            for attr, member in vars(obj).items():
                if not attr.startswith("_") and inspect.isfunction(member):
                    yield f"{name}.{attr}", member


def test_every_public_function_is_typed_and_has_an_example():
    import inspect

    seen = []
    for name, obj in _public_callables():
        seen.append(name)
        doc = inspect.getdoc(obj) or ""
        assert doc, f"{name}: no docstring"
        if inspect.isfunction(obj):
            assert ">>>" in doc, f"{name}: docstring without an example"
            sig = inspect.signature(obj)
            missing = [p for p in sig.parameters.values()
                       if p.name != "self" and p.annotation is inspect.Parameter.empty]
            assert not missing, f"{name}: parameters without type hints: {missing}"
            assert sig.return_annotation is not inspect.Signature.empty, f"{name}: no return type"
    assert {"plan", "sweep", "export_te", "Plan.records", "TeExport.write", "CompassError"} <= set(seen)
    assert ">>>" in (inspect.getdoc(tpcompass.CompassError) or "")


def test_native_module_stub_matches_the_module():
    """tpcompass/_core.pyi names exactly what the native module exports (after pip install .)."""
    import ast
    import pathlib

    stub = ast.parse((pathlib.Path(tpcompass.__file__).parent / "_core.pyi").read_text())
    names = {n.name for n in stub.body if isinstance(n, ast.FunctionDef)}
    names |= {n.target.id for n in stub.body if isinstance(n, ast.AnnAssign)}
    assert names == {"run", "version", "planning_only"}
    core = pytest.importorskip("tpcompass._core")  # built only by pip install .
    public = {n for n in dir(core) if not n.startswith("_")}
    assert public == names


def _has_simulator():
    """False only for the planning build with no compass binary on PATH to fall back on."""
    from tpcompass import _api

    return not _api._planning_only() or _api.shutil.which("compass") is not None


def test_sweep_progress(capsys):
    steps = []
    sim = _has_simulator()
    s = tpcompass.sweep(limit=3, sim=sim, progress=lambda *step: steps.append(step))
    assert len(s.rows) == 3
    # Every row is planned, then simulated, in order.
    assert steps == [("planning", 1, 3), ("planning", 2, 3), ("planning", 3, 3)] + (
        [("simulating", 1, 3), ("simulating", 2, 3), ("simulating", 3, 3)] if sim else [])
    # progress=True draws tqdm bars on stderr even when it is not a terminal; the default does
    # not when stderr is not a terminal (as here, under pytest's capture).
    capsys.readouterr()
    tpcompass.sweep(limit=2, progress=True)
    assert "planning" in capsys.readouterr().err
    tpcompass.sweep(limit=2)
    assert capsys.readouterr().err == ""
    # Errors are still the CLI's one line.
    with pytest.raises(tpcompass.CompassError, match="--limit"):
        tpcompass.sweep(limit=-1, progress=lambda *step: None)


def test_native_progress_streams_lines():
    """The native module hands progress lines to the callback and keeps the rest of stderr."""
    core = pytest.importorskip("tpcompass._core")  # built only by pip install .
    lines = []
    rc, out, err = core.run(["sweep", "--limit", "2", "--progress", "lines", "--json"], lines.append)
    assert rc == 0 and json.loads(out)["rows"]
    assert lines == ["planning 1/2", "planning 2/2"] and err == ""
    rc, _, err = core.run(["sweep", "--limit", "-1", "--progress", "lines"], lines.append)
    assert rc == 2 and err.startswith("compass: error:") and "--limit" in err


def _python(script):
    """Runs a Python script in a child with the real descriptors 1 and 2 (no pytest capture),
    on the same tpcompass backend as this process; returns the completed process."""
    return subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          env=dict(os.environ), timeout=300, check=False)


def test_a_printing_progress_callback_keeps_the_result():
    child = _python(
        "import sys, tpcompass\n"
        "def cb(label, done, total):\n"
        "    print(f'step {label} {done}/{total}')\n"
        "    print(f'err {done}', file=sys.stderr)\n"
        "s = tpcompass.sweep(limit=3, progress=cb)\n"
        "print('rows', len(s.rows), sum(s.summary['wins'].values()))\n")
    assert child.returncode == 0, child.stderr
    assert child.stdout.splitlines() == ["step planning 1/3", "step planning 2/3",
                                         "step planning 3/3", "rows 3 3"]
    assert child.stderr.splitlines() == ["err 1", "err 2", "err 3"]


def test_progress_bar_reaches_stderr():
    child = _python("import tpcompass\n"
                    "print(len(tpcompass.sweep(limit=3, progress=True).rows))\n")
    assert child.returncode == 0, child.stderr
    assert child.stdout == "3\n"
    assert "planning" in child.stderr and "3/3" in child.stderr


def test_progress_callback_errors_are_raised():
    def fail(label, done, total):
        raise RuntimeError(f"stop at {done}")

    with pytest.raises(RuntimeError, match="stop at 1"):
        tpcompass.sweep(limit=3, progress=fail)
    assert len(tpcompass.sweep(limit=2).rows) == 2  # the next call runs normally


def test_planning_build_refuses_what_it_leaves_out(monkeypatch):
    """The planning build (pip install . by default) runs simulate/run on a compass binary
    when one is on PATH, and otherwise refuses with one line saying how to get them."""
    from tpcompass import _api

    calls = []

    class PlanningCore:
        planning_only = True

        @staticmethod
        def run(args, on_progress=None):
            calls.append(args[0])
            if args[0] == "sweep":  # what the module's simulator stub answers
                return (2, "", "compass: error: --sim: this build has no simulator "
                        "(configure with -DCOMPASS_WITH_SIM=ON)\n")
            raise AssertionError(f"{args[0]} must not run in the planning build")

    binary = os.environ.get("COMPASS_CLI")
    monkeypatch.setattr(_api, "_core", PlanningCore)
    monkeypatch.delenv("COMPASS_CLI", raising=False)
    monkeypatch.setattr(_api.shutil, "which", lambda name: None)
    refusals = [lambda: tpcompass.simulate("ag_gemm", m=1024, n=512, k=256, tp=2),
                lambda: tpcompass.run(["run", "--op", "ag_gemm"]),
                lambda: tpcompass.sweep(limit=2, sim=True)]
    for call in refusals:
        with pytest.raises(tpcompass.CompassError, match="planning build") as e:
            call()
        assert "\n" not in str(e.value) and "COMPASS_PLANNING_ONLY=OFF" in str(e.value)
    assert calls == ["sweep"]
    if binary:  # with a compass binary on PATH the same calls run there
        monkeypatch.setattr(_api.shutil, "which", lambda name: binary)
        assert len(tpcompass.sweep(limit=2, sim=True).rows) == 2
        assert tpcompass.simulate("ag_gemm", m=1024, n=512, k=256, tp=2, strategy="sequential")


def test_native_run_output_stays_in_memory(capfd):
    """The native module never writes the run's output to descriptors 1 and 2."""
    core = pytest.importorskip("tpcompass._core")  # built only by pip install .
    capfd.readouterr()
    rc, out, err = core.run(["list", "presets", "--json"])
    assert rc == 0 and any(p["name"] == "a6000x8" for p in json.loads(out))
    rc, _, err = core.run(["plan", "--tp", "16"])
    assert rc == 2 and err == "compass: error: --tp 16 exceeds the 8 GPUs of 'a6000x8'\n"
    assert capfd.readouterr() == ("", "")
    with pytest.raises(RuntimeError, match="cannot start another"):
        core.run(["sweep", "--limit", "1", "--progress", "lines"],
                 lambda line: core.run(["list", "presets"]))
