"""FUSER_CHECK_CUDA_COMPILE: on a CPU, kernels run in Triton's interpreter are also compiled for a CUDA GPU
(Triton's compiler and ptxas, no GPU needed), so a kernel the interpreter accepts but the GPU compiler
rejects fails here, not first on a GPU. The programs below are those whose kernels once failed only on
the GPU (docs/conformance.md), each with the launch settings the GPU uses for small sizes and with
settings that make the GPU pick the looped and two-stage variants."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import fuser
from fuser.emit import ir
from fuser.emit.codegen import Builder
from fuser.runtime import gpu_compile_check, launch_config


def negated_twice(x):
    return torch.neg(torch.neg(x))  # the conformance suite's producer context


def group_norm_of_negated(x, w, b):
    return F.group_norm(negated_twice(x), 1, w, b, 1e-5)


def layer_norm_of_negated(x, w, b):
    return F.layer_norm(negated_twice(x), x.shape[-1:], w, b)


def rms_norm_of_negated(x, w, b):
    return F.rms_norm(negated_twice(x), x.shape[-1:], w) + b


def softmax_then_scale(x, w, b):
    return torch.softmax(x, -1) * w + b


def rolled_row_sums(x, w, b):
    return torch.roll(x * w, 3, 1).sum(1, keepdim=True) + b


def stacked_then_scaled(x, w, b):
    return torch.stack([x, x * 2], 0).sum(0) * w + b


def column_sums(x, w, b):
    return x.sum(0) * w + b


def var_mean_and_argmax(x, w, b):
    var, mean = torch.var_mean(x * w, 1, keepdim=True)
    return var + mean + x.argmax(1, keepdim=True).to(x.dtype) + b


PROGRAMS = [
    group_norm_of_negated,
    layer_norm_of_negated,
    rms_norm_of_negated,
    softmax_then_scale,
    rolled_row_sums,
    stacked_then_scaled,
    column_sums,
    var_mean_and_argmax,
]

# Small thresholds: the GPU's launch for these small sizes becomes a looped row kernel, a looped outer
# reduction, or a two-stage split, instead of a persistent kernel.
LOOPED = {
    "GPU_PERSISTENT_MAX": 16,
    "GPU_OUTER_RBLOCK": 4,
    "GPU_LOOP_RBLOCK": 16,
    "GPU_SPLIT_RBLOCK": 16,
    "SPLIT_MIN_COLS": 64,
}


@pytest.mark.parametrize("settings", [{}, LOOPED], ids=["gpu-defaults", "gpu-looped"])
@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.__name__)
def test_kernels_compile_for_cuda(program, settings, device, monkeypatch):
    monkeypatch.setenv(gpu_compile_check.CHECK_ENV, "90")
    for name, value in settings.items():
        monkeypatch.setattr(launch_config, name, value)
    # Transposed: the weight gradients reduce over the outer dim of a column-major input.
    x = torch.randn(7, 150, device=device).t().requires_grad_()
    w = torch.randn(7, device=device, requires_grad=True)
    b = torch.randn(7, device=device, requires_grad=True)
    compiled = fuser.compile(program, strict=True, dynamic=False)
    got = compiled(x, w, b)
    got.sum().backward()
    grads = [t.grad for t in (x, w, b)]
    for t in (x, w, b):
        t.grad = None
    expected = program(x, w, b)
    expected.sum().backward()
    torch.testing.assert_close(got, expected, rtol=1e-4, atol=1e-4)
    for g, t in zip(grads, (x, w, b), strict=True):
        torch.testing.assert_close(g, t.grad, rtol=1e-4, atol=1e-4)
    counts = fuser.counters()
    checked = counts["cuda_compile_checks"] if device == "cpu" else counts["kernels_launched"]
    assert checked > 0, counts


def test_a_name_read_after_the_loop_that_defined_it_is_a_gpu_compile_error():
    # The interpreter runs the kernel as Python, where a loop's names outlive it; Triton's compiler
    # does not, which is how row kernels once failed on the GPU only.
    import triton
    import triton.language as tl

    @triton.jit
    def loop_scoped(out_ptr, n, BLOCK: tl.constexpr):
        for start in range(0, n, BLOCK):
            offsets = start + tl.arange(0, BLOCK)
        tl.store(out_ptr + offsets, 1.0)

    with pytest.raises(RuntimeError, match="loop_scoped does not compile for CUDA sm_90"):
        gpu_compile_check.compile_for_cuda(loop_scoped, [torch.empty(64), 64], {"BLOCK": 16}, 90)


@pytest.mark.parametrize("value", ["hopper", "9", "sm90a"])
def test_an_unreadable_capability_is_refused(value, monkeypatch):
    monkeypatch.setenv(gpu_compile_check.CHECK_ENV, value)
    with pytest.raises(ValueError, match="FUSER_CHECK_CUDA_COMPILE"):
        gpu_compile_check.target_capability()


@pytest.mark.parametrize(("value", "capability"), [("90", 90), ("sm_80", 80), ("sm100", 100), ("", None)])
def test_a_capability_is_read(value, capability, monkeypatch):
    monkeypatch.setenv(gpu_compile_check.CHECK_ENV, value)
    assert gpu_compile_check.target_capability() == capability


def test_a_keyword_argument_name_is_not_read_as_a_value():
    # `mask=row_mask` reads the row mask (level 1), not the full mask named `mask` (level 2): read as
    # level 2, a row value was stored after a looped kernel's column loop with `mask`, undefined there.
    # An expression's level comes from the names it was made from (fuser.emit.ir), never from its text.
    builder = Builder.__new__(Builder)
    builder.levels = {"row_mask": 1, "mask": 2, "r1": 1, "cols": 2}
    row_load = ir.over("tl.load(in1_ptr + r1 * in1_stride1, mask=row_mask)", "in1_ptr", "r1", "row_mask")
    assert builder.level(row_load) == 1
    assert builder.level(ir.over("tl.load(in1_ptr + r1 + cols, mask=mask)", "r1", "cols", "mask")) == 2
    assert builder.level(ir.over("tl.where(mask == 0, r1, 0)", "mask", "r1")) == 2


def test_a_horizontal_kernel_is_compiled_for_cuda_too(device, monkeypatch):
    # An optimizer step's horizontal kernels (fuser.plan.horizontal) were not checked: a kernel that took
    # 264 s to compile for sm_90 went unnoticed until a GPU compiled it.
    if device != "cpu":
        pytest.skip("the check compiles interpreted kernels; on CUDA every kernel is compiled anyway")
    monkeypatch.setenv(gpu_compile_check.CHECK_ENV, "90")
    params = [torch.randn(n, requires_grad=True) for n in (5, 7, 9)]
    for p in params:
        p.grad = torch.randn_like(p)
    optimizer = torch.optim.AdamW(params, lr=1e-2, foreach=True)
    fuser.reset_counters()
    torch.compile(optimizer.step, backend="fuser", options={"horizontal": True})()
    counts = fuser.counters()
    assert counts["kernels_launched"] == 2 and counts["cuda_compile_checks"] == 2, counts


def test_column_sums_with_their_rows_compile_for_cuda(device, monkeypatch):
    # A row-major layer norm's backward: its weight and bias gradients are summed by the kernel computing
    # its input's gradient (a row_groups kernel and its column kernel's split_combine).
    monkeypatch.setenv(gpu_compile_check.CHECK_ENV, "90")
    x = torch.randn(37, 150, device=device, requires_grad=True)
    w, b = (torch.randn(150, device=device, requires_grad=True) for _ in range(2))
    compiled = fuser.compile(layer_norm_of_negated, strict=True, dynamic=False)
    with torch.autograd.set_multithreading_enabled(False), fuser.collecting() as graphs:
        compiled(x, w, b).sum().backward()
    assert "row_groups" in [k.kind for g in graphs for k in g.kernels]
    counts = fuser.counters()
    checked = counts["cuda_compile_checks"] if device == "cpu" else counts["kernels_launched"]
    assert checked > 0, counts


def test_launches_pin_fp_fusion_on_so_a_triton_default_change_cannot_change_answers(tmp_path, monkeypatch):
    """Every kernel was validated with multiplies and adds contracted into FMAs, Triton 3.6-3.9's default;
    Triton 3.9 warns the default turns off in 3.10. A launch's options ask for it: the binary is the one
    the default builds, unlike FP fusion off, and Triton has nothing to warn about."""
    import warnings

    from fuser.explain import explain
    from fuser.runtime import kernel_cache

    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("TRITON_DEFAULT_FP_FUSION", raising=False)
    (source,) = explain(lambda x, y: x * y + x, torch.randn(37, 5), torch.randn(37, 5)).kernels
    jit_fn = kernel_cache.load_file(kernel_cache.kernel_file(source), source.name)
    args = [torch.empty(16)] * 3 + [185]
    pinned = launch_config.pointwise_options(1024, interpreted=False)
    assert pinned["enable_fp_fusion"] is True
    binaries = {}
    for name, options in [("pinned", pinned), ("off", {**pinned, "enable_fp_fusion": False})]:
        monkeypatch.setattr(gpu_compile_check, "_compiled", {})
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # Triton's warning would fail the compile
            binaries[name] = gpu_compile_check.compile_for_cuda(jit_fn, args, options, 90).asm["cubin"]
    default = {k: v for k, v in pinned.items() if k != "enable_fp_fusion"}
    monkeypatch.setattr(gpu_compile_check, "_compiled", {})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        binaries["default"] = gpu_compile_check.compile_for_cuda(jit_fn, args, default, 90).asm["cubin"]
    assert binaries["pinned"] == binaries["default"] != binaries["off"]
