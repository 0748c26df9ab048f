"""benchmarks/compare.py, the fuser against the default backend and eager on a GPU: its workloads are the
perf gate's definitions (no copy creeps back), its CLI parses, and its correctness stage runs on the CPU."""

from __future__ import annotations

import importlib.util
import inspect
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from perfgate import measure
from perfgate import workloads as gate

SCRIPT = Path(__file__).parents[2] / "benchmarks" / "compare.py"
# The one workload compare.py times that the gate does not judge: built there from the gate's parts.
COMPARE_ONLY = {"sum_all"}


@pytest.fixture(scope="module")
def script():
    spec = importlib.util.spec_from_file_location("compare_script", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_workload_is_the_gates_definition(script):
    for name, workload in script.WORKLOADS.items():
        assert isinstance(workload, gate.Workload) and workload.name == name
        if name in COMPARE_ONLY:
            assert name not in gate.WORKLOADS
            assert workload.make_inputs.__module__ == gate.__name__, f"{name}: its inputs are not the gate's"
            assert workload.sizes is gate.ROWS_COLS, f"{name}: its sizes are not the gate's"
        else:
            assert workload is gate.WORKLOADS.get(name), (
                f"{name} is not perfgate.workloads.WORKLOADS[{name!r}]"
            )
    for alias, name in script.ALIASES.items():
        assert alias not in script.WORKLOADS and name in script.WORKLOADS
    # What it timed before it took the gate's definitions is still there, under the gate's names.
    assert {"pointwise_chain", "add_layer_norm", "rms_norm", "softmax", "sum_all"} <= set(script.WORKLOADS)
    assert script.ALIASES["layer_norm_fwd_bwd"] == "add_layer_norm_backward"


def test_no_workload_program_or_measurement_of_the_gate_is_defined_again(script):
    defined_here = {
        name
        for name, value in vars(script).items()
        if inspect.isfunction(value) and value.__module__ == script.__name__
    }
    gate_programs = {w.program.__name__ for w in gate.WORKLOADS.values()}
    gate_functions = {name for name, value in vars(gate).items() if inspect.isfunction(value)}
    measurements = {name for name, value in vars(measure).items() if inspect.isfunction(value)}
    assert not defined_here & (gate_programs | gate_functions | measurements)
    assert script.copy_peak_bytes_per_s is measure.copy_peak_bytes_per_s
    assert ".copy_(" not in SCRIPT.read_text(), "compare.py measures a copy of its own"
    programs_here = {w.program for w in script.WORKLOADS.values() if w.program.__module__ == script.__name__}
    assert programs_here == {script.WORKLOADS[name].program for name in COMPARE_ONLY}


def test_the_help_lists_every_workload(tmp_path):
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--help"], cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    options = done.stdout.split("\noptions:\n")[1]  # not the description, which names some of them too
    for option in ("--json", "--workload", "--sweep", "--device", "--repeats", "--rows", "--cols"):
        assert re.search(rf"^  {option} ", options, re.MULTILINE), f"{option} is not an option"
    for name in ("pointwise_chain", "add_layer_norm_backward", "sum_all", "chain", "layer_norm_fwd_bwd"):
        assert re.search(rf"[{{,]{name}[,}}]", options), f"{name} is not a --workload choice"


def test_a_sweep_sets_a_launch_constant_wherever_the_fuser_keeps_it_and_restores_it(
    script, tmp_path, monkeypatch
):
    monkeypatch.setenv("FUSER_KERNEL_DIR", str(tmp_path / "kernels"))
    x = torch.ones(3)
    assert script.compile_fusing_everything(lambda x: x + 1)(x).eq(2).all()  # every fuser module loaded
    holders = [m for m in script._fuser_modules() if "GPU_BLOCK" in vars(m)]
    assert holders, "no loaded fuser module holds GPU_BLOCK, the constant --help's example sweeps"
    before = holders[0].GPU_BLOCK
    restore = script.apply_settings(f"GPU_BLOCK={2 * before}")
    try:
        assert {m.GPU_BLOCK for m in holders} == {2 * before}
    finally:
        assert script.apply_settings(restore) == f"GPU_BLOCK={2 * before}"
    assert {m.GPU_BLOCK for m in holders} == {before}
    with pytest.raises(SystemExit, match="NO_SUCH_SETTING"):
        script.apply_settings("NO_SUCH_SETTING=1")


def _fuser_and_eager(script, monkeypatch):
    # The default backend on the CPU compiles C++: minutes on a small machine, and not what is tested.
    monkeypatch.setattr(script, "VARIANTS", {v: script.VARIANTS[v] for v in ("fuser", "eager")})


def test_the_correctness_stage_runs_on_the_cpu(script, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("FUSER_KERNEL_DIR", str(tmp_path / "kernels"))
    _fuser_and_eager(script, monkeypatch)
    out = tmp_path / "results.json"
    script.main(["--device", "cpu", "--workload", "layer_norm_fwd_bwd", "--json", str(out)])
    assert "add_layer_norm_backward" in capsys.readouterr().out
    (entry,) = json.loads(out.read_text())["workloads"].values()
    assert entry["sizes"] == [gate.ROWS_COLS["cpu"], {"rows": 3, "cols": 7}]
    assert entry["fuser_launches_per_call"] >= 1
    assert 0 <= entry["max_relative_error"]["fuser"] < script.TOLERANCE


def test_the_correctness_stage_stops_on_a_wrong_answer(script, tmp_path, monkeypatch):
    monkeypatch.setenv("FUSER_KERNEL_DIR", str(tmp_path / "kernels"))
    _fuser_and_eager(script, monkeypatch)
    wrong = script.Backend(
        "fuser", lambda program: lambda *inputs: program(*inputs) * 1.1, counted_by_fuser=True
    )
    monkeypatch.setitem(script.VARIANTS, "fuser", wrong)
    with pytest.raises(AssertionError, match="relative error"):
        script.main(["--device", "cpu", "--workload", "softmax"])
