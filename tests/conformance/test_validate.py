"""The validation command's decisions: what it writes, what it refuses, how it resumes.

Running an op's full tier takes minutes on CI's two cores, so these tests give `main` the verdicts a
run would produce (`run_op` replaced) and check what it does with them; the real runs are the
bootstrap of fuser/manifest/cpu.toml (docs/validation.md). `ran_eagerly` is checked for real.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import tomllib
from pathlib import Path

import pytest

from conformance import validate
from conformance.validate import manifest_check
from fuser.lower.lowerings import fingerprint
from fuser.testing.miscompiles import ENV
from fuser.validate import validation

REPO = Path(__file__).resolve().parents[2]


def verdict(op="aten.neg.default", cases=65, passed=("float32", "int64"), expected=(), failures=()):
    return validate.Verdict(op, cases, tuple(passed), tuple(expected), list(failures), 1.0)


@pytest.fixture
def run(tmp_path, monkeypatch):
    """Run `main` on `verdicts` (by op); returns (exit status, stdout, manifest text or None, progress)."""
    monkeypatch.setattr(validate, "ran_eagerly", lambda op, dtypes, device: [])

    def go(verdicts: dict, *argv: str, capsys=None):
        calls = []

        def run_op(op, backend, device, log_dir, workers=1):
            calls.append(op)
            return verdicts[op]

        monkeypatch.setattr(validate, "run_op", run_op)
        options = ["--manifest-dir", str(tmp_path), "--progress", str(tmp_path / "progress.json")]
        if "--fuzz-examples" not in argv:  # the fuzz stage's own tests: test_validate_fuzz.py
            options += ["--fuzz-examples", "0"]
        status = validate.main([*argv, *options, "--logs", str(tmp_path / "logs")])
        manifest = tmp_path / "cpu.toml"
        return status, calls, manifest.read_text() if manifest.exists() else None

    return go


def test_a_passing_op_gets_an_entry_the_fuser_reads(run, tmp_path):
    status, _, _ = run({"aten.neg.default": verdict()}, "aten.neg.default")
    assert status == 0
    entry = validation.load("cpu", tmp_path).entries["aten.neg.default"]
    assert entry.dtypes == ("float32", "int64") and entry.cases == 65 and entry.fresh
    assert entry.fingerprint == fingerprint("aten.neg.default", "cpu")


def test_a_failure_writes_nothing_and_prints_the_rerun_command(run, capsys):
    failing = verdict(
        failures=[("aten.neg.default-int8-alone-fwd", "failed", "nox -s conformance -- --op x")]
    )
    status, _, text = run({"aten.neg.default": failing}, "aten.neg.default")
    out = capsys.readouterr().out
    assert status == 1 and text is None
    assert "aten.neg.default-int8-alone-fwd: failed" in out and "rerun: nox -s conformance -- --op x" in out
    assert "| aten.neg.default | 65 | FAILED |" in out


def test_expected_failures_are_not_validated(run, tmp_path, capsys):
    status, _, _ = run(
        {"aten.neg.default": verdict(passed=("float32",), expected=("float16",))}, "aten.neg.default"
    )
    assert status == 0
    assert validation.load("cpu", tmp_path).entries["aten.neg.default"].dtypes == ("float32",)
    assert "| float16 |" in capsys.readouterr().out


def test_dtypes_the_fuser_does_not_lower_are_left_out(run, tmp_path):
    # bitwise_not is lowered for integers and bool only: a passing float case ran eagerly.
    op = "aten.bitwise_not.default"
    run({op: verdict(op=op, passed=("float32", "int32"))}, op)
    assert validation.load("cpu", tmp_path).entries[op].dtypes == ("int32",)


def test_all_unvalidated_resumes_and_skips_what_failed_at_the_same_lowering(run, tmp_path, monkeypatch):
    real = validate.lowerings.lowerings()
    two = {op: real[op] for op in ("aten.neg.default", "aten.exp.default")}
    monkeypatch.setattr(validate.lowerings, "lowerings", lambda: two)
    failing = verdict(op="aten.exp.default", failures=[("x", "failed", "cmd")])
    verdicts = {"aten.neg.default": verdict(), "aten.exp.default": failing}
    status, calls, _ = run(verdicts, "--all-unvalidated")
    assert status == 1 and sorted(calls) == ["aten.exp.default", "aten.neg.default"]
    progress = json.loads((tmp_path / "progress.json").read_text())
    assert progress["aten.exp.default"]["outcome"] == "failed"
    status, calls, _ = run(verdicts, "--all-unvalidated")  # neg has its entry; exp failed at this lowering
    assert status == 0 and calls == []
    status, calls, _ = run(verdicts, "--all-unvalidated", "--retry-failed")
    assert calls == ["aten.exp.default"]


def test_shards_split_the_ops(run):
    verdicts = {op: verdict(op=op) for op in ("aten.neg.default", "aten.exp.default", "aten.abs.default")}
    ops = list(verdicts)
    _, first, _ = run(verdicts, *ops, "--shard", "1/2")
    _, second, _ = run(verdicts, *ops, "--shard", "2/2")
    assert first == ["aten.neg.default", "aten.abs.default"] and second == ["aten.exp.default"]


def test_bad_arguments_are_clear_errors(capsys):
    with pytest.raises(SystemExit, match=r"unknown op 'aten\.nosuch\.default'"):
        validate.main(["aten.nosuch.default"])
    with pytest.raises(SystemExit):
        validate.main([])
    assert "name the ops to validate, or give --all-unvalidated" in capsys.readouterr().err


def test_ran_eagerly_sees_an_op_the_fuser_leaves_eager(monkeypatch):
    from fuser.plan import partition

    assert validate.ran_eagerly("aten.neg.default", ("float32",), "cpu") == []
    # a view of an input is an eager alias by design: views are judged where a kernel computes the input
    assert validate.ran_eagerly("aten.unsqueeze.default", ("float32",), "cpu") == []
    original = partition.lowering_obstacle
    monkeypatch.setattr(
        partition,
        "lowering_obstacle",
        lambda node: "planted" if str(node.target) == "aten.neg.default" else original(node),
    )
    assert validate.ran_eagerly("aten.neg.default", ("int64",), "cpu") == ["int64"]


def test_backward_cases_only_where_eager_has_a_backward():
    # Eager's CPU i1 has no Half or BFloat16 backward: such cases could only fail ("no sample ran").
    from conformance.plugin import cases

    keys = cases("aten.special_i1.default", "full", "fuser", "cpu")
    backward = {k.dtype for k in keys if k.direction == "bwd"}
    assert backward == {"float32", "float64"}
    assert {"float16", "bfloat16"} <= {k.dtype for k in keys if k.direction == "fwd"}
    assert validate.expected_cases("aten.special_i1.default", "fuser", "cpu") == len(keys) == 60


def test_an_op_the_fuser_ran_eagerly_is_not_validated(run, monkeypatch, capsys):
    monkeypatch.setattr(validate, "ran_eagerly", lambda op, dtypes, device: list(dtypes))
    status, _, text = run({"aten.neg.default": verdict()}, "aten.neg.default")
    assert status == 0 and text is None
    assert (
        "| aten.neg.default | 65 | nothing validated | float32, int64 | - | float32, int64 |"
        in capsys.readouterr().out
    )


def test_proxies_of_one_conformance_op_run_it_once(run, tmp_path):
    # prims.sum and prims.var are validated through aten.var.correction's cases: one run serves both.
    ops = ("prims.sum.default", "prims.var.default")
    the_run = verdict(op="prims.sum.default", passed=("float32",))
    status, calls, _ = run({"prims.sum.default": the_run}, *ops)
    assert status == 0 and calls == ["prims.sum.default"]
    manifest = validation.load("cpu", tmp_path)
    assert set(ops) <= set(manifest.entries)
    assert manifest.entries["prims.var.default"].dtypes == ("float32",)


# --- the fuzz stage: random programs that call the op, after its cases pass ----------------------------


def programs_drawn(require_op, count: int) -> tuple[list, list]:
    """`count` programs the fuzz stage's strategy draws for `require_op` (an op or a batch of ops), with a
    fixed seed: all draws, and those that are programs (a draw that cannot call the op is None)."""
    from hypothesis import HealthCheck, given, seed, settings

    from conformance.fuzz.strategies import programs

    drawn = []

    @seed(20261127)
    @settings(max_examples=count, database=None, suppress_health_check=list(HealthCheck))
    @given(programs(require_op=require_op))
    def collect(program):
        drawn.append(program)

    collect()
    return drawn, [p for p in drawn if p is not None]


@pytest.mark.parametrize(
    "op", ["aten.sub.Tensor", "aten.sum.dim_IntList", "aten.where.self", "aten.bitwise_and.Scalar"]
)
def test_every_program_the_fuzz_stage_draws_calls_its_op(op):
    drawn, found = programs_drawn(op, 30)
    twin = op.replace(f".{op.split('.')[1]}.", f".{op.split('.')[1]}_.")
    assert all(f"torch.ops.{op}(" in p.source() or f"torch.ops.{twin}(" in p.source() for p in found)
    assert len(found) >= 5, f"{len(drawn) - len(found)} of {len(drawn)} draws could not call {op}"
    assert any(len(p.nodes) > 1 for p in found)  # among other ops, not alone


def test_a_fuzz_stage_that_passes_records_its_programs_in_the_entry(run, tmp_path, capsys):
    status, _, text = run({"aten.neg.default": verdict()}, "aten.neg.default", "--fuzz-examples", "4")
    assert status == 0
    fuzz = tomllib.loads(text)["op"][0]["fuzz"]
    assert 1 <= fuzz <= 4
    assert f"| {fuzz} passed in" in capsys.readouterr().out
    assert validation.load("cpu", tmp_path).entries["aten.neg.default"].fresh  # the loader accepts it
    path = tmp_path / "cpu.toml"
    assert [p for p in manifest_check.problems(path) if "no entry in" not in p] == []  # the others: not here
    path.write_text(text.replace(f"fuzz = {fuzz}", "fuzz = -1"))
    assert any("fuzz: -1 is less than the minimum of 1" in p for p in manifest_check.problems(path))


def test_a_planted_miscompile_fails_validation_in_its_fuzz_stage(run, tmp_path, monkeypatch, capsys):
    # The conformance stage is given as passing (it takes minutes). The planted bug is exp's own
    # lowering, so that every drawn program meets it whatever hypothesis draws: a kind that lives
    # between ops (docs/validation.md: exp with inplace_reads_own_output passes its 70 cases and fails
    # its fuzz stage) is found by some seeds' programs only, and the draws change with the sources.
    monkeypatch.setenv(ENV, "wrong_lowering:aten.exp.default")
    op, repros = "aten.exp.default", tmp_path / "fuzz"
    argv = (op, "--fuzz-examples", "20", "--fuzz-out", str(repros))
    status, _, text = run({op: verdict(op=op)}, *argv)
    out = capsys.readouterr().out
    assert status == 1 and text is None
    (repro,) = repros.glob("repro_*.py")
    assert f"| {op} | 65 | FAILED |" in out and "FAILED after" in out and repro.name in out
    assert f"{op} fuzz stage (" in out and f"rerun: FUSER_UNVALIDATED=fuse python {repro}" in out
    assert f"the fuzz run: FUSER_UNVALIDATED=fuse python -m conformance.fuzz --profile ci --op {op}" in out


def test_the_fuzz_stage_says_why_it_did_not_run(run, capsys):
    view, op = "aten.unsqueeze.default", "aten.neg.default"
    failing = verdict(op=op, failures=[("x", "failed", "cmd")])
    status, _, text = run({view: verdict(op=view), op: failing}, view, op, "--fuzz-examples", "4")
    out = capsys.readouterr().out
    assert status == 1 and "fuzz =" not in text
    assert "| skipped: not in the fuzzer's vocabulary: views are steps on its operands" in out
    assert "| not run: conformance failed |" in out
    run({op: verdict(op=op)}, op, "--fuzz-examples", "0")
    assert "| off: --fuzz-examples 0 |" in capsys.readouterr().out


def test_the_fuzz_stage_says_why_it_skips_an_op_the_fuzzer_leaves_out():
    from conformance.validate.fuzz import fuzz_skip_reason

    assert fuzz_skip_reason("aten.neg.default") is None
    assert "unspecified_at" in fuzz_skip_reason("aten.i0.default")  # ±inf: eager's CPU and CUDA differ
    assert "views are steps" in fuzz_skip_reason("aten.unsqueeze.default")
    assert "reached only inside aten.var.correction" in fuzz_skip_reason(
        "prims.var.default", ("aten.var.correction",)
    )


# --- a batch: one pytest run over several ops' cases, fuzz groups, resumable (real runs) ---------------
# Two cheap ops (integer-only, forward-only: 30 cases each) keep these to about a minute each. Both take
# one tensor: bitwise_and.Scalar's 30 cases run in about 17 s where bitwise_and.Tensor's took 23 s.
CHEAP = ("aten.bitwise_and.Scalar", "aten.bitwise_not.default")


def batch(tmp_path, *argv: str) -> int:
    options = ["--manifest-dir", str(tmp_path), "--progress", str(tmp_path / "progress.json")]
    options += ["--logs", str(tmp_path / "logs"), "--fuzz-out", str(tmp_path / "fuzz")]
    return validate.main(["--batch", "--workers", "2", *argv, *options])


def entries(directory) -> dict[str, dict]:
    return {e["op"]: e for e in tomllib.loads((directory / "cpu.toml").read_text())["op"]}


# What an entry says of the op rather than of the run that wrote it (its date, commit, versions, fuzz count).
OF_THE_OP = ("op", "arch", "dtypes", "cases", "fingerprint")


def test_a_batch_writes_one_op_s_entry_and_fails_only_its_planted_op(tmp_path, monkeypatch, capsys):
    clean, planted = CHEAP
    monkeypatch.setenv(ENV, f"wrong_lowering:{planted}")  # the batch's pytest inherits it
    assert batch(tmp_path, *CHEAP, "--fuzz-passes", "0") == 1
    out = capsys.readouterr().out
    written = entries(tmp_path)
    # As the op's own run wrote it into the committed manifest (one op's run, not repeated here: its 30
    # cases are a third of this test's time), whose fingerprints test_manifest.py holds current.
    committed = entries(REPO / "fuser" / "manifest")[clean]
    assert list(written) == [clean]
    assert {key: written[clean][key] for key in OF_THE_OP} == {key: committed[key] for key in OF_THE_OP}
    assert f"{planted}: nothing written; failing cases" in out
    assert (
        f"{planted}-int8-alone-fwd: failed" in out
        and f"--conformance-op {planted} --conformance-dtype int8" in out
    )
    progress = json.loads((tmp_path / "progress.json").read_text())
    assert progress[clean]["outcome"] == "validated" and progress[planted]["outcome"] == "failed"
    assert [p for p in manifest_check.problems(tmp_path / "cpu.toml") if "no entry in" not in p] == []


def test_every_program_of_a_batch_calls_one_of_its_ops_and_most_call_all(monkeypatch):
    from conformance.fuzz.strategies import calls

    ops = ("aten.exp.default", "aten.sub.Tensor", "aten.sum.dim_IntList")
    _, found = programs_drawn(ops, 40)
    assert len(found) >= 30 and all(any(calls(p, op) for op in ops) for p in found)
    assert sum(all(calls(p, op) for op in ops) for p in found) > len(found) // 2  # most: 24 of 40 here


def test_a_fuzz_batch_failure_fails_only_the_ops_its_shrunk_program_calls(tmp_path, monkeypatch):
    from conformance.fuzz.batch import fuzz_batch

    clean, planted = CHEAP
    monkeypatch.setenv(ENV, f"wrong_lowering:{planted}")
    report = fuzz_batch(CHEAP, 3, seed=7, out=tmp_path)
    assert list(report.failed) == [planted] and planted in report.failed[planted].failure.source()
    assert report.passed[clean] >= 3 and not report.vacuous  # the other op went on, and passed
    assert (tmp_path / report.failed[planted].repro.name).exists()


def test_an_interrupted_batch_resumes_without_running_a_finished_case_again(tmp_path):
    first, second = CHEAP  # one worker runs the first op's cases, then the second's
    state = tmp_path / "progress.batch.jsonl"
    options = ["--manifest-dir", str(tmp_path), "--progress", str(tmp_path / "progress.json")]
    options += ["--logs", str(tmp_path / "logs"), "--fuzz-passes", "2", "--fuzz-out", str(tmp_path / "fuzz")]
    command = [sys.executable, "-m", "conformance.validate", "--batch", "--workers", "1", *CHEAP, *options]
    run = subprocess.Popen(command, cwd=REPO, start_new_session=True, stdout=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 600
        while logged(state, second) < 3:  # killed once the first op's cases and a few more are logged
            assert run.poll() is None and time.monotonic() < deadline
            time.sleep(0.2)
    finally:
        os.killpg(run.pid, signal.SIGKILL)  # the batch, its pytest and pytest's workers
        run.wait()
    assert logged(state, first) == 30 and logged(state, second) < 30 and not (tmp_path / "cpu.toml").exists()
    assert validate.main(["--batch", "--workers", "1", *CHEAP, *options]) == 0
    launches = [
        line["launch"] for line in map(json.loads, state.read_text().splitlines()) if "launch" in line
    ]
    assert [list(launch) for launch in launches] == [list(CHEAP), [second]]  # the first op not again
    assert logged(state, first) == logged(state, second) == 30  # nor any case logged before the kill
    assert set(entries(tmp_path)) == set(CHEAP)
    assert all(entry["fuzz"] >= 2 for entry in entries(tmp_path).values())


def logged(state: Path, op: str) -> int:
    if not state.exists():
        return 0
    return sum(f'"op": "{op}"' in line for line in state.read_text().splitlines())


def test_a_large_batch_is_cut_into_pytest_runs_of_bounded_size():
    from conformance.validate.batch import chunks

    counts = {"a": 1200, "b": 1200, "c": 300, "d": 3000, "e": 10}
    assert chunks(list(counts), counts, limit=2500) == [["a", "b"], ["c"], ["d"], ["e"]]
    assert chunks(["a"], counts, limit=2500) == [["a"]]
    assert all(
        sum(counts[op] for op in run) <= 2500 or len(run) == 1
        for run in chunks(list(counts), counts, limit=2500)
    )
