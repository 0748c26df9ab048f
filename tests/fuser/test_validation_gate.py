"""The validation gate: an op is fused only where the manifest validates it, fresh, for its dtype; the
opt-in fuses it anyway; a malformed manifest is an error naming the file and line.

These tests turn the suite-wide opt-in (tests/conftest.py) off and point the fuser at a manifest of
their own, so they do not depend on how far the committed manifest has come.
"""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pytest
import torch

import fuser
from fuser.lower.lowerings import compute_fingerprint, fingerprint, lowerings
from fuser.validate import validation

# These tests leave ops eager on purpose: tests/fuser/conftest.py does not fail them for it.
pytestmark = pytest.mark.validation_gate

EAGER = {"unvalidated": "eager"}


def entry(op: str, dtypes=("float32",), print_fingerprint: str | None = None, **changes) -> str:
    fields = {
        "op": op,
        "arch": "cpu",
        "dtypes": list(dtypes),
        "torch": "2.13.0",
        "triton": "3.9.0",
        "date": "2026-11-25",
        "cases": 70,
        "commit": "483cb1e",
        "fingerprint": print_fingerprint or fingerprint(op, "cpu"),
    } | changes
    lines = ["[[op]]"] + [f"{k} = {v!r}".replace("'", '"') for k, v in fields.items() if v is not None]
    return "\n".join(lines) + "\n\n"


@pytest.fixture
def manifest(tmp_path, monkeypatch):
    """Write tmp_path/cpu.toml and make the fuser read it."""
    monkeypatch.setattr(validation, "MANIFEST_DIR", tmp_path)
    monkeypatch.delenv("FUSER_UNVALIDATED", raising=False)

    def write(text: str) -> Path:
        path = tmp_path / "cpu.toml"
        path.write_text(text)
        validation.reload()
        return path

    yield write
    validation.reload()


def test_validated_op_is_fused_and_others_run_eager_with_the_reason(manifest):
    manifest(entry("aten.mul.Tensor"))
    report = fuser.explain(lambda x: (x * 2).exp(), torch.randn(8), fuser_options=EAGER)
    assert report.num_kernels == 1
    (op, reason), *_ = report.fallbacks
    assert op == "aten.exp.default"
    assert "not validated on cpu (no entry in cpu.toml)" in reason
    assert "nox -s validate -- aten.exp.default" in reason and "FUSER_UNVALIDATED=fuse" in reason
    assert "aten.exp.default" in report.eager_calls


def test_a_dtype_the_entry_does_not_validate_runs_eager(manifest):
    manifest(entry("aten.mul.Tensor", dtypes=("float32",)))
    report = fuser.explain(lambda x: x * 3, torch.arange(8), fuser_options=EAGER)
    assert report.num_kernels == 0
    assert "not validated on cpu for int64 (validated: float32)" in report.fallbacks[0][1]


def test_a_stale_entry_runs_eager(manifest):
    manifest(entry("aten.mul.Tensor", print_fingerprint="0123456789abcdef"))
    report = fuser.explain(lambda x: x * 2, torch.randn(8), fuser_options=EAGER)
    assert report.num_kernels == 0
    assert "stale (the lowering changed since 2026-11-25)" in report.fallbacks[0][1]


def test_the_opt_in_fuses_unvalidated_ops(manifest, monkeypatch):
    manifest("")
    fn, x = (lambda x: (x * 2).exp()), torch.randn(8)
    assert fuser.explain(fn, x, fuser_options={"unvalidated": "fuse"}).num_kernels == 1
    monkeypatch.setenv("FUSER_UNVALIDATED", "fuse")
    assert fuser.explain(fn, x).num_kernels == 1
    monkeypatch.setenv("FUSER_UNVALIDATED", "eager")
    assert fuser.explain(fn, x).num_kernels == 0


def test_bad_option_values_are_clear_errors(monkeypatch):
    with pytest.raises(TypeError, match="option unvalidated takes one of eager, fuse, got 'yes'"):
        fuser.Options.from_dict({"unvalidated": "yes"})
    with pytest.raises(TypeError, match="option strict takes a bool"):
        fuser.Options.from_dict({"strict": "fuse"})
    monkeypatch.setenv("FUSER_UNVALIDATED", "always")
    with pytest.raises(ValueError, match="FUSER_UNVALIDATED='always'; expected one of eager, fuse"):
        fuser.Options.from_dict({})


def test_an_arch_without_a_manifest_runs_eager_and_warns_once(manifest, monkeypatch, caplog):
    manifest("")
    monkeypatch.setattr(validation, "arch_of", lambda device: "sm_90")
    with caplog.at_level(logging.WARNING, logger="fuser"):
        first = validation.obstacle("aten.mul.Tensor", torch.float32, torch.device("cpu"))
        second = validation.obstacle("aten.exp.default", torch.float32, torch.device("cpu"))
    assert first == second == "no validation manifest for sm_90 (sm_90.toml)"
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert "every op runs eagerly" in warnings[0] and "FUSER_UNVALIDATED=fuse" in warnings[0]
    assert "--all-unvalidated --device cuda" in warnings[0]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            entry("aten.add.Tensor") + entry("aten.nosuch.default", print_fingerprint="0" * 16),
            r"cpu.toml:12: unknown op 'aten.nosuch.default'",
        ),
        (
            entry("aten.bitwise_and.Tensor", dtypes=("int32", "float32")),
            r"cpu.toml:1: .*float32 .*not lowered",
        ),
        (entry("aten.add.Tensor", cases=None), r"cpu.toml:1: malformed entry: missing cases"),
        (entry("aten.add.Tensor", colour="red"), r"cpu.toml:1: malformed entry: unknown field\(s\) colour"),
        (
            entry("aten.add.Tensor", arch="sm_90"),
            r"cpu.toml:1: aten.add.Tensor: arch 'sm_90' in the manifest",
        ),
        (entry("aten.add.Tensor", cases="70"), r"cpu.toml:1: aten.add.Tensor: cases must be a positive"),
        (
            entry("aten.add.Tensor") * 2,
            r"cpu.toml:12: aten.add.Tensor: a second entry \(the first is at line 1\)",
        ),
        ("[[op]]\nop = \n", r"cpu.toml: not valid TOML: .*line 2"),
    ],
)
def test_a_malformed_manifest_names_the_file_and_line(tmp_path, text, message):
    path = tmp_path / "cpu.toml"
    path.write_text(text)
    with pytest.raises(validation.ManifestError, match=message):
        validation.load("cpu", tmp_path)


def test_an_unknown_architecture_is_an_error(tmp_path):
    path = tmp_path / "gpu.toml"
    path.write_text(entry("aten.add.Tensor"))
    with pytest.raises(validation.ManifestError, match=r"gpu.toml: unknown architecture 'gpu'"):
        validation.parse(path.read_text(), path)


def test_fingerprints_follow_the_lowering(monkeypatch):
    from fuser.lower import ops

    before = compute_fingerprint("aten.hypot.default", "cpu")
    assert before != compute_fingerprint("aten.atan2.default", "cpu")
    hypot = ops.POINTWISE_BY_OVERLOAD[torch.ops.aten.hypot.default]
    changed = type(hypot)(
        **{**hypot.__dict__, "render": lambda a, b: f"libdevice.sqrt({a} * {a} + {b} * {b})"}
    )
    monkeypatch.setitem(ops.POINTWISE_BY_OVERLOAD, torch.ops.aten.hypot.default, changed)
    assert compute_fingerprint("aten.hypot.default", "cpu") != before


def test_cpu_fingerprints_follow_what_the_interpreters_stand_ins_compute_with(monkeypatch):
    # The interpreter's libdevice stand-ins share one wrapper's source: swapping the NumPy function
    # behind exp (what i0e calls) must still change the fingerprint, on the cpu only.
    from fuser.interpreter import libdevice as interpreter_libdevice

    before = {arch: compute_fingerprint("aten.special_i0e.default", arch) for arch in ("cpu", "sm_90")}
    monkeypatch.setattr(interpreter_libdevice, "exp", interpreter_libdevice._elementwise(np.exp))
    assert compute_fingerprint("aten.special_i0e.default", "cpu") != before["cpu"]
    assert compute_fingerprint("aten.special_i0e.default", "sm_90") == before["sm_90"]


def test_every_lowered_op_is_named_and_has_dtypes():
    found = lowerings()
    assert "aten.add.Tensor" in found and "prims.div.default" in found and "aten.amax.default" in found
    assert found["aten.bitwise_and.Tensor"].dtypes == ("int8", "int16", "int32", "int64", "uint8", "bool")
    assert all(lowering.dtypes for lowering in found.values())
