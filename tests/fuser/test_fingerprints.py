"""A manifest entry's fingerprint hashes the kernels its op emits (`fuser.validate.probes`): a change to shared
code generation stales every entry whose kernels it changes, a comment stales none, and a change to one
op's lowering stales that op's entries alone. Each test compares fingerprints computed in-process
(`compute_fingerprint`), before and after a change planted with monkeypatch."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest
import torch

from fuser.emit import codegen
from fuser.lower import lowerings, ops
from fuser.lower.lowerings import compute_fingerprint
from fuser.validate import validation

# Every kind of lowering: pointwise ops of each typing, reductions (plain, arg, var), views, scatters.
SAMPLE = (
    "aten.neg.default",
    "aten.add.Tensor",
    "aten.where.self",
    "aten.eq.Tensor",
    "aten.gelu.default",
    "aten._to_copy.default",
    "aten.bitwise_and.Tensor",
    "aten.atan2.default",
    "aten.sum.dim_IntList",
    "aten.amax.default",
    "aten.argmax.default",
    "prims.var.default",
    "aten.view.default",
    "aten.permute.default",
    "aten.slice.Tensor",
    "aten.cat.default",
    "aten.slice_scatter.default",
)
ARCHES = ("cpu", "sm_90")


def fingerprints(names=SAMPLE) -> dict[tuple[str, str], str]:
    return {(name, arch): compute_fingerprint(name, arch) for name in names for arch in ARCHES}


@pytest.fixture(scope="module")
def before() -> dict[tuple[str, str], str]:
    """The sample's fingerprints with nothing planted (computed once: 0.15 s an op and arch)."""
    return fingerprints([*SAMPLE, "aten.hypot.default", "aten.mul.Tensor"])


def pointwise_source_edited(monkeypatch, edit) -> None:
    """Plant `edit` into the printed function of every pointwise kernel."""
    printed = codegen.KernelSource.function.func

    def edited(self):
        return edit(printed(self)) if self.kind == "pointwise" else printed(self)

    monkeypatch.setattr(codegen.KernelSource, "function", property(edited))


def test_a_change_to_shared_code_generation_stales_every_entry_whose_kernels_it_changes(monkeypatch, before):
    before = {key: value for key, value in before.items() if key[0] in SAMPLE}
    emits_pointwise = {n for n in SAMPLE if "mask = offset < numel" in lowerings.describe(n, "sm_90")}
    pointwise_source_edited(monkeypatch, lambda text: text.replace("offset < numel", "offset <= numel"))
    after = fingerprints()
    stale = {key for key in before if before[key] != after[key]}
    assert stale == {(n, arch) for n in emits_pointwise for arch in ARCHES}
    # Reductions emit row kernels only; everything else has a pointwise kernel among its probes.
    assert len(emits_pointwise) >= len(SAMPLE) // 2


def test_a_comment_or_a_blank_line_in_emitted_kernels_stales_no_entry(monkeypatch, before):
    before = {key: value for key, value in before.items() if key[0] in SAMPLE}
    pointwise_source_edited(
        monkeypatch,
        lambda text: text.replace(
            "pid = tl.program_id(0)", "pid = tl.program_id(0)  # this block\n\n  # (reworded)"
        ).replace(", ", ",  "),
    )
    assert fingerprints() == before


def test_a_change_to_one_ops_lowering_stales_that_op_alone(monkeypatch, before):
    # A hash of all of fuser/ would stale every entry here.
    others = [*SAMPLE, "aten.mul.Tensor"]
    hypot = ops.POINTWISE_BY_OVERLOAD[torch.ops.aten.hypot.default]
    changed = type(hypot)(
        **{**hypot.__dict__, "render": lambda a, b: f"libdevice.sqrt({a} * {a} + {b} * {b})"}
    )
    monkeypatch.setitem(ops.POINTWISE_BY_OVERLOAD, torch.ops.aten.hypot.default, changed)
    after = fingerprints([*others, "aten.hypot.default"])
    stale = {key for key in before if before[key] != after[key]}
    assert stale == {("aten.hypot.default", arch) for arch in ARCHES}


def test_an_attribute_the_renderer_branches_on_is_probed(monkeypatch):
    # gelu's tanh approximation is not its default: editing that branch alone still stales gelu.
    before = compute_fingerprint("aten.gelu.default", "cpu")
    gelu = ops.POINTWISE_BY_OVERLOAD[torch.ops.aten.gelu.default]
    original = gelu.render
    planted = lambda x, approximate="none": original(x, approximate).replace("0.044715", "0.0447")  # noqa: E731
    monkeypatch.setitem(
        ops.POINTWISE_BY_OVERLOAD,
        torch.ops.aten.gelu.default,
        type(gelu)(**{**gelu.__dict__, "render": planted}),
    )
    assert compute_fingerprint("aten.gelu.default", "cpu") != before


def test_a_planted_miscompile_does_not_reach_the_fingerprints(monkeypatch):
    # The quality tests plant miscompiles in the kernels programs run; the fingerprints that decide what
    # is validated must stay those of the real lowering, so the planted op is still fused.
    before = compute_fingerprint("aten.neg.default", "cpu")
    monkeypatch.setenv("FUSER_TESTING_MISCOMPILE", "partial_block_mask")
    assert compute_fingerprint("aten.neg.default", "cpu") == before


def test_checking_freshness_costs_no_kernel_generation_once_cached():
    # Warm the disk cache (as any earlier process would have), then time a fresh in-process lookup of
    # the sample's entries: what a graph's gate pays for each of its ops, once a process.
    names = list(SAMPLE)
    for name in names:
        lowerings.fingerprint(name, "cpu")
    lowerings.fingerprint.cache_clear()
    start = time.perf_counter()
    for name in names:
        lowerings.fingerprint(name, "cpu")
    per_op = (time.perf_counter() - start) / len(names)
    assert per_op < 0.002, f"{per_op * 1e3:.2f} ms an op"
    manifest = validation.load("cpu")
    assert manifest is not None


def test_a_fingerprint_is_the_same_in_every_process():
    # A set's order follows string hashing, which Python seeds per process: clamp's table entry holds
    # one, and its fingerprint differed between two processes (an entry validated in one read as stale
    # in the other). Two seeds under which that set's order differs; every op's table entry, and the
    # whole fingerprint of the sample and of clamp.
    script = (
        "import json, sys\n"
        "from fuser.lower import lowerings\n"
        "from fuser.lower.lowerings import compute_fingerprint\n"
        "names = sys.argv[1:]\n"
        "tables = {n: lowerings._table_entry(lowerings._overload(n)) for n in lowerings.lowerings()}\n"
        "prints = {n: compute_fingerprint(n, 'sm_90') for n in names}\n"
        "print(json.dumps([tables, prints]))\n"
    )
    names = [*SAMPLE, "aten.clamp.default", "aten.clamp.Tensor"]
    found = []
    for seed in ("1", "3"):
        run = subprocess.run(
            [sys.executable, "-c", script, *names],
            env=os.environ | {"PYTHONHASHSEED": seed},
            capture_output=True,
            text=True,
            check=True,
        )
        found.append(json.loads(run.stdout))
    (tables_a, prints_a), (tables_b, prints_b) = found
    assert [n for n in tables_a if tables_a[n] != tables_b[n]] == []
    assert [n for n in prints_a if prints_a[n] != prints_b[n]] == []


def test_a_change_to_an_ops_gradient_decomposition_stales_that_op_alone(monkeypatch):
    # logit's gradient kernels are built from the fuser's own logit_backward decomposition, which its
    # probes (forward kernels) never emit: a bug there must stale logit's entries, and nothing else's.
    from fuser.capture.backend import decomposition_table

    names = ("aten.logit.default", "aten.sigmoid.default", "aten.neg.default")
    before = {name: compute_fingerprint(name, "cpu") for name in names}

    def planted(grad, x, eps=None):
        return grad * x * (1 - x)

    planted.__module__ = "fuser.capture.backend"
    monkeypatch.setitem(decomposition_table(), torch.ops.aten.logit_backward.default, planted)
    after = {name: compute_fingerprint(name, "cpu") for name in names}
    assert after["aten.logit.default"] != before["aten.logit.default"]
    assert [after[n] for n in names[1:]] == [before[n] for n in names[1:]]


def test_the_committed_fingerprint_table_is_this_source_s_and_holds_what_is_computed_today():
    # The gate reads fingerprints from this table instead of generating every op's probe kernels at a
    # fresh machine's first compile (5 s of GPT-2's on the CPU): it must be written for this very source.
    table = json.loads(lowerings.SHIPPED.read_text())
    assert table["source"] == lowerings.fuser_source_hash(), (
        "fuser/manifest/fingerprints.json was written for another version of the fuser's source: "
        "run `python -m fuser.validate.write_fingerprints` and commit it"
    )
    assert table == lowerings.shipped_table()


def test_the_gate_reads_the_committed_table_only_where_it_was_written_for_this_source(tmp_path, monkeypatch):
    name, computed = "aten.neg.default", lowerings.fingerprint("aten.neg.default", "cpu")
    planted = tmp_path / "fingerprints.json"
    monkeypatch.setattr(lowerings, "SHIPPED", planted)
    for source, want in ((lowerings.fuser_source_hash(), "0" * 16), ("another source", computed)):
        planted.write_text(json.dumps({"source": source, "fingerprints": {"cpu": {name: "0" * 16}}}))
        lowerings._shipped.cache_clear()
        assert lowerings.gate_fingerprint(name, "cpu") == want
    lowerings._shipped.cache_clear()
