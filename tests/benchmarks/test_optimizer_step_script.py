"""benchmarks/optimizer_step.py, the script of issue 13's recorded GPU run, on the CPU at tiny sizes:
it must run end to end before a lent GPU's minutes are spent on it."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

SCRIPT = Path(__file__).parents[2] / "benchmarks" / "optimizer_step.py"


def test_the_optimizer_benchmark_prints_its_table_and_writes_its_details(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("FUSER_KERNEL_DIR", str(tmp_path / "kernels"))
    spec = importlib.util.spec_from_file_location("optimizer_step", SCRIPT)
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    argv = ["--optimizer", "sgd", "--params", "3", "--min-numel", "1", "--max-numel", "40", "--device", "cpu"]
    assert script.main([*argv, "--variants", "eager,fuser", "--reps", "2", "--out", str(tmp_path)]) == 0
    printed = capsys.readouterr().out
    header = "| variant | ms per step | kernel ms per step | kernels per step | first call s | copy rate % |"
    assert header in printed
    eager, compiled = json.loads((tmp_path / "optimizer-step-cpu.json").read_text())["results"]["sgd"]
    assert eager["matches_eager"] == "reference" and compiled["matches_eager"].startswith("yes")
    assert compiled["kernels_per_step"] == 1 and compiled["fuser_kernels_in_graphs"] == 1
    assert compiled["fuser_eager_calls"] == [] and compiled["second_optimizer"]["kernels_compiled"] == 0
    assert (tmp_path / "sgd-fuser-explain.txt").exists()


def test_the_graph_variants_are_refused_on_the_cpu(capsys):
    spec = importlib.util.spec_from_file_location("optimizer_step", SCRIPT)
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    with pytest.raises(SystemExit):
        script.main(["--device", "cpu", "--variants", "eager,fuser_graph"])
    assert "need --device cuda" in capsys.readouterr().err
