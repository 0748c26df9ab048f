"""Reductions, softmax and normalizations fused with their neighbours: counts, shapes and numerics."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from shared_checks import fused_matches_eager

import fuser
from fuser.runtime import launch_config


def softmax(x):
    return torch.softmax(x, -1)


def layer_norm(x, w, b):
    return F.layer_norm(x, x.shape[-1:], w, b)


def add_layer_norm(x, r, w, b):
    return F.layer_norm(x + r, x.shape[-1:], w, b)


def rms_norm(x, w):
    return F.rms_norm(x, x.shape[-1:], w)


@pytest.mark.parametrize(
    ("name", "program", "shapes"),
    [
        ("softmax", softmax, [(37, 45)]),
        ("layer_norm", layer_norm, [(37, 45), (45,), (45,)]),
        ("add_layer_norm", add_layer_norm, [(37, 45), (37, 45), (45,), (45,)]),
        ("rms_norm", rms_norm, [(37, 45), (45,)]),
        ("log_softmax", lambda x: torch.log_softmax(x, -1), [(37, 45)]),
    ],
)
def test_each_normalization_is_one_kernel(name, program, shapes, device):
    args = [torch.randn(s, device=device) for s in shapes]
    report = fused_matches_eager(program, *args, atol=1e-5, rtol=1e-4)
    assert report.num_kernels == 1, str(report)
    assert report.eager_calls == []


def test_layer_norm_forward_and_backward_take_at_most_three_kernels(device):
    x = torch.randn(29, 40, device=device, requires_grad=True)
    w = torch.randn(40, device=device, requires_grad=True)
    b = torch.randn(40, device=device, requires_grad=True)
    compiled = fuser.compile(layer_norm, strict=True)
    grad = torch.randn(29, 40, device=device)
    compiled(x, w, b).backward(grad)
    got = [t.grad.clone() for t in (x, w, b)]
    launched = fuser.counters()["kernels_launched"]
    for t in (x, w, b):
        t.grad = None
    layer_norm(x, w, b).backward(grad)
    for g, t in zip(got, (x, w, b), strict=True):
        torch.testing.assert_close(g, t.grad, atol=1e-4, rtol=1e-4)
    assert launched <= 3
    assert fuser.counters()["extern_calls"] == 0


def test_a_reduction_feeding_a_matmul_is_one_kernel_and_one_extern_call(device):
    x, w = torch.randn(33, 20, device=device), torch.randn(20, 7, device=device)
    report = fused_matches_eager(lambda x, w: torch.softmax(x, -1) @ w, x, w, atol=1e-5, rtol=1e-4)
    assert report.num_kernels == 1
    assert report.eager_calls == ["aten.mm.default"]


REDUCTIONS = {
    "sum": lambda x: x.sum(1),
    "mean_keepdim": lambda x: x.mean(1, keepdim=True),
    "prod": lambda x: (x * 0.1 + 1).prod(1),
    "amax": lambda x: x.amax(1),
    "amin_two_dims": lambda x: x.amin((0, 2)) if x.dim() == 3 else x.amin(0),
    "max_values_and_indices": lambda x: x.max(1),
    "min_keepdim": lambda x: x.min(0, keepdim=True),
    "argmax": lambda x: x.argmax(1),
    "argmin_flat": lambda x: x.argmin(),
    "var_unbiased": lambda x: x.var(1),
    "std_correction_0": lambda x: x.std(0, correction=0),
    "var_mean": lambda x: torch.var_mean(x, 1),
    "logsumexp": lambda x: x.logsumexp(1),
    "norm": lambda x: torch.linalg.vector_norm(x, dim=1),
    "any": lambda x: (x > 0.5).any(1),
    "all": lambda x: (x > -2).all(0),
}
SHAPES = {
    "short_rows": (257, 3),
    "odd": (37, 45),
    "one_long_row": (2, 20000),
    "non_innermost": (64, 5),
}


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_every_reduction_matches_eager_on_every_row_shape(reduction, shape, device):
    x = torch.randn(SHAPES[shape], device=device)
    report = fused_matches_eager(REDUCTIONS[reduction], x, atol=1e-4, rtol=1e-4)
    assert report.fallbacks == []


def test_a_row_of_a_million_elements_uses_the_looped_kernel(device):
    x = torch.randn(1, 2**20, device=device)
    report = fused_matches_eager(softmax, x, atol=1e-6, rtol=1e-4)
    assert "looped kernel" in report.sources[0]


def test_only_persistent_row_kernels_ask_l2_to_keep_their_rows(device):
    x = torch.randn(3, 1000, device=device)
    persistent = fused_matches_eager(softmax, x, atol=1e-6, rtol=1e-4).sources[0]
    loads = [line for line in persistent.splitlines() if "tl.load(" in line]
    assert loads and all("eviction_policy='evict_last'" in line for line in loads)
    looped = fused_matches_eager(softmax, torch.randn(1, 2**20, device=device), atol=1e-6, rtol=1e-4).sources[
        0
    ]
    assert "looped kernel" in looped and "eviction_policy" not in looped


@pytest.mark.parametrize(
    ("program", "whole_inputs", "gpu_warps"),
    [(softmax, 1, 4), (rms_norm, 1, 4), (add_layer_norm, 2, 8)],
    ids=["softmax", "rms_norm", "add_layer_norm"],
)
def test_row_kernel_warps_follow_the_whole_rows_they_hold(device, program, whole_inputs, gpu_warps):
    # A warp per 2048 elements held: on the H200, softmax's 4096-column rows were fastest on 4 warps.
    x, r, w = (
        torch.randn(4, 4096, device=device),
        torch.randn(4, 4096, device=device),
        torch.randn(4096, device=device),
    )
    args = {softmax: (x,), rms_norm: (x, w), add_layer_norm: (x, r, w, w)}[program]
    (kernel,) = fused_matches_eager(program, *args, atol=1e-5, rtol=1e-4).kernels
    assert kernel.row_inputs == whole_inputs
    config = launch_config.choose_config([kernel], {"num_rows": 16384, "num_cols": 8192}, interpreted=False)
    assert config.warps == gpu_warps


@pytest.mark.parametrize(
    ("program", "rblock"),
    [(lambda t: t.float().logsumexp(-1), "GPU_LOOP_RBLOCK"), (softmax, "GPU_LOOP_WRITE_RBLOCK")],
    ids=["reduces_only", "writes_rows"],
)
def test_looped_kernels_take_columns_by_whether_they_write_rows(device, program, rblock):
    # On the H200 cross-entropy's forward (it only reduces) was faster at 8192 columns an iteration, its
    # backward (it writes the gradient's rows) slower.
    report = fused_matches_eager(program, torch.randn(3, 300, device=device), atol=1e-5, rtol=1e-5)
    (kernel,) = report.kernels
    looped = launch_config.choose_config([kernel], {"num_rows": 8192, "num_cols": 32000}, interpreted=False)
    assert looped.variant == 1 and looped.blocks["RBLOCK"] == getattr(launch_config, rblock)
    assert looped.warps == 4


@pytest.mark.parametrize(
    "view", [lambda m: m[-4:], lambda m: m.narrow(0, 0, 4)], ids=["negative_start_slice", "narrow"]
)
def test_a_reduction_read_through_a_slice_goes_through_memory(device, view):
    # The slice's start is a kernel argument, so the kernel cannot tell that output row i reads the row
    # max of row i: the max is stored by its own kernel and the slice's kernel loads it (before, the
    # kernel failed to generate: NotImplementedError, or an eager fallback outside strict mode).
    x = torch.randn(4, 300, device=device)
    program = lambda t: view(t.amax(-1)) * 2  # noqa: E731
    report = fuser.explain(program, x, fuser_options={"strict": True})
    torch.testing.assert_close(report.result, program(x))
    assert report.num_kernels == 2 and report.fallbacks == []


def test_the_partitioner_decides_which_reductions_go_through_memory_before_any_code_is_written(
    device, monkeypatch
):
    # Each kernel is generated once: code generation no longer finds out, by failing, that a kernel reads
    # a reduction at another row (slices of the row maxes and sums here) and makes the partition run again.
    from fuser.emit import generation

    generated = []
    generate = generation.generate
    monkeypatch.setattr(generation, "generate", lambda kernel: generated.append(kernel) or generate(kernel))
    x = torch.randn(5, 300, device=device)
    program = lambda t: t.amax(-1)[1:] * 2 + t.sum(-1)[:-1]  # noqa: E731
    report = fuser.explain(program, x, fuser_options={"strict": True})
    torch.testing.assert_close(report.result, program(x))
    assert report.num_kernels == 2 and report.fallbacks == []
    assert len(generated) == len(set(map(id, generated))) == 2


@pytest.mark.parametrize(
    "program",
    [
        lambda t: t.amax(-1).transpose(0, 1) + t.sum(-1),  # kept dims swapped: row (i, j) reads (j, i)
        lambda t: t.amax(-1).permute(1, 0) * t.sum(-1),
        lambda t: t.amax(-1)[:, -4:] * 2,  # a slice's start is an argument: not known to keep the row
        lambda t: (t - t.amax(-1, keepdim=True)).exp().sum(-1).transpose(0, 1) / t.sum(-1),
        lambda t: t - t.amax(-1, keepdim=True).expand(4, 4, 5),  # expand keeps rows: one kernel
    ],
    ids=["transpose", "permute", "slice", "softmax_sum_transposed", "expand"],
)
def test_the_partitioner_and_the_row_builder_agree_on_every_view_of_a_reduction(device, program):
    # Strict: a reduction the partitioner leaves in a kernel that the builder then finds read at another
    # row raises (ReadAtAnotherRow), so each program checks that the two agree; with the partitioner's
    # walk turned off, the first four fail. Positive inputs: a sum of normal values can nearly cancel, and
    # dividing by it amplified float32 reordering past assert_close's tolerance (1 run in 3 to 6 failed).
    x = (torch.rand(4, 4, 5, generator=torch.Generator().manual_seed(0)) + 0.5).to(device)
    report = fuser.explain(program, x, fuser_options={"strict": True})
    torch.testing.assert_close(report.result, program(x))
    assert report.fallbacks == [] and report.eager_calls == []


@pytest.mark.parametrize("shape", [(3, 3), (5, 5, 5)])
def test_a_row_value_broadcast_along_the_reduced_dim_is_read_at_another_row(device, shape):
    # x.sum(-1) has the kept dims' shape; added to x (whose last dims it matches) it lines up, right-aligned,
    # with the reduced dim: element (i, j) reads row j's sum. The partitioner saw only views and scatters
    # move rows, so the builder raised ReadAtAnotherRow (strict; by default the kernel ran eagerly with a
    # warning). Found by the fuzzer (session 19: `FUSER_STRICT=1 FUSER_UNVALIDATED=fuse ... --seed 19282`).
    x = (torch.rand(*shape, generator=torch.Generator().manual_seed(0)) + 0.5).to(device)
    program = lambda t: t.sum(-1) + t  # noqa: E731
    report = fuser.explain(program, x, fuser_options={"strict": True, "unvalidated": "fuse"})
    torch.testing.assert_close(report.result, program(x))
    assert report.fallbacks == [] and report.eager_calls == []


def test_reductions_over_non_innermost_dims_read_in_place_without_a_transposed_copy(device):
    x = torch.randn(6, 7, 8, device=device)
    report = fused_matches_eager(lambda t: t.sum(1) + t.amax(1), x, atol=1e-5, rtol=1e-5)
    assert report.num_kernels == 1
    assert report.eager_calls == []


def test_half_inputs_accumulate_in_fp32(device):
    x = torch.full((4, 4096), 0.1, device=device, dtype=torch.bfloat16)
    got = fuser.compile(lambda t: t.sum(1))(x)
    assert got.dtype == torch.bfloat16
    # Accumulating in bf16 would stall far below the true sum (~409.6).
    torch.testing.assert_close(got.float(), x.float().sum(1), rtol=1e-2, atol=0)


def test_variance_is_two_pass_and_survives_a_large_mean(device):
    x = 1e4 + torch.randn(8, 1000, device=device)
    got = fuser.compile(lambda t: t.var(1))(x)
    torch.testing.assert_close(got, x.double().var(1).float(), rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize("variant", ["persistent", "looped"])
def test_a_row_of_equal_values_has_a_variance_of_exactly_zero_and_std_a_zero_gradient(
    device, variant, monkeypatch
):
    # Found by the fuzzer: a mean off by one rounding (sum(x) / n) gave rows of equal values a variance
    # of ~1e-13, and std's gradient there was 1 / (2 * std) times that rounding (2.67), where eager's
    # Welford gives exactly 0 and std's backward masks it to 0.
    if variant == "looped":
        monkeypatch.setattr(launch_config, "CPU_MAX_BLOCK", 64)
        monkeypatch.setattr(launch_config, "GPU_PERSISTENT_MAX", 64)
    values = torch.tensor([2.9, 0.1, -1 / 3, 7.77, 1e4 + 0.3], device=device)
    for columns in (3, 7, 300) if variant == "persistent" else (65, 300):
        torch._dynamo.reset()  # static sizes each time (a dynamic backward runs its SymFloat scale eagerly)
        x = values[:, None].expand(5, columns).clone().requires_grad_()
        report = fuser.explain(lambda t: t.std(1), x)
        assert any(f"{variant} kernel" in s for s in report.sources), report.sources
        compiled = fuser.compile(lambda t: t.std(1), dynamic=False, unvalidated="fuse")(x)
        assert torch.equal(compiled, torch.zeros(5, device=device)), compiled
        (gradient,) = torch.autograd.grad(compiled, x, torch.ones_like(compiled))
        assert torch.equal(gradient, torch.zeros_like(x)), gradient


def test_max_and_argmax_propagate_nan_and_take_the_first_index_on_ties(device):
    x = torch.tensor(
        [
            [1.0, 3.0, 3.0, 0.0],
            [float("nan"), 5.0, float("nan"), 1.0],
            [2.0, 2.0, 2.0, 2.0],
            [-1.0, float("nan"), 7.0, 7.0],
        ],
        device=device,
    )
    fused_matches_eager(lambda t: (t.max(1), t.argmin(1), t.amax(0)), x)


def test_integer_sums_promote_to_int64_like_eager(device):
    x = torch.full((3, 70000), 100, dtype=torch.int8, device=device)
    report = fused_matches_eager(lambda t: (t.sum(1), t.sum()), x)
    assert report.result[1].item() == 21_000_000


def test_reductions_over_zero_size_dims_give_eagers_identity(device):
    x = torch.randn(4, 0, device=device)
    fused_matches_eager(lambda t: (t.sum(1), t.prod(1), (t > 0).any(1), (t > 0).all(1)), x)


def test_no_rows_of_long_rows_reduce_to_an_empty_result(device):
    # Zero rows of 20000 columns: a looped kernel with no programs, whose split-reduction sizing divided
    # by the zero program count (ZeroDivisionError).
    x = torch.randn(0, 20000, device=device)
    program = lambda t: (t.sum(1), t.amax(1))  # noqa: E731
    report = fuser.explain(program, x, fuser_options={"strict": True})
    for got, expected in zip(report.result, program(x), strict=True):
        assert got.shape == expected.shape and got.dtype == expected.dtype
    assert report.fallbacks == []


def test_out_of_range_reduction_dims_raise_eagers_error(device):
    x = torch.randn(4, 5, device=device)
    with pytest.raises(IndexError):
        x.sum(2)
    with pytest.raises(Exception, match="out of range"):
        fuser.compile(lambda t: t.sum(2))(x)


def test_reduction_dtype_arguments_are_honoured(device):
    x = torch.randint(0, 9, (5, 6), dtype=torch.int32, device=device)
    fused_matches_eager(lambda t: (t.sum(1, dtype=torch.float64), t.to(torch.float16).mean(0)), x)


def test_a_training_step_of_a_small_mlp_with_layer_norm_matches_eager_gradients(device):
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(24, 32), torch.nn.LayerNorm(32), torch.nn.GELU(), torch.nn.Linear(32, 8)
    ).to(device)
    x, target = torch.randn(16, 24, device=device), torch.randn(16, 8, device=device)

    def step(model, x, target):
        loss = F.mse_loss(model(x), target)
        loss.backward()
        return loss

    compiled_loss = fuser.compile(step, strict=True)(model, x, target)
    fused_grads = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    eager_loss = step(model, x, target)
    torch.testing.assert_close(compiled_loss, eager_loss, atol=1e-5, rtol=1e-5)
    for fused, p in zip(fused_grads, model.parameters(), strict=True):
        torch.testing.assert_close(fused, p.grad, atol=1e-5, rtol=1e-4)
    assert fuser.counters()["kernels_launched"] > 0


def test_dynamic_softmax_compiles_once_per_layout_class_over_twenty_sizes(device):
    compiled = fuser.compile(softmax, dynamic=True, strict=True)
    for rows, cols in [(2 + 5 * i, 3 + 37 * i) for i in range(20)]:
        x = torch.randn(rows, cols, device=device)
        torch.testing.assert_close(compiled(x), softmax(x), atol=1e-6, rtol=1e-5)
    counts = fuser.counters()
    assert counts["graphs_compiled"] == 1
    assert counts["kernels_compiled"] == 1  # every size here fits the persistent variant
    assert counts["kernels_launched"] == 20


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_layer_norm_gradients_are_as_close_to_float64_as_eagers_at_an_awkward_size(dtype, device):
    # Many rows: the weight and bias gradients reduce over the outer dim with the looped kernel.
    torch.manual_seed(0)
    x, w, b = (
        torch.randn(s, device=device, dtype=dtype, requires_grad=True) for s in [(120, 781), (781,), (781,)]
    )
    grad = torch.randn(120, 781, device=device, dtype=dtype)
    exact_inputs = [t.detach().double().requires_grad_() for t in (x, w, b)]
    exact = torch.autograd.grad(layer_norm(*exact_inputs), exact_inputs, grad.double())
    eager = torch.autograd.grad(layer_norm(x, w, b), (x, w, b), grad)
    fused = torch.autograd.grad(fuser.compile(layer_norm, strict=True)(x, w, b), (x, w, b), grad)
    for name, got, want, truth in zip("xwb", fused, eager, exact, strict=True):
        fused_error = ((got.double() - truth).norm() / truth.norm()).item()
        eager_error = ((want.double() - truth).norm() / truth.norm()).item()
        assert fused_error <= 2 * eager_error + 1e-6, (
            f"d{name}: fused {fused_error:.2e}, eager {eager_error:.2e}"
        )


def _loop_locals_read_after_their_loop(source: str) -> set[str]:
    """Names first assigned inside a `for` loop and read after it: Triton (unlike Python) rejects them."""
    import re

    body = source.split("@triton.jit")[1].split("\n")[2:]
    defined_outside, loop_locals, leaked, in_loop = set(), set(), set(), False
    for line in body:
        stripped = line.strip()
        if not stripped:
            continue
        indent = len(line) - len(line.lstrip())
        if stripped.startswith("for "):
            in_loop = True
            continue
        in_loop = in_loop and indent > 4
        if not in_loop:
            read = re.sub(r"\b\w+=(?!=)", "", stripped)  # keyword names (mask=...) are not reads
            leaked |= loop_locals & set(re.findall(r"[A-Za-z_]\w*", read))
        target = stripped.split(" = ")[0] if " = " in stripped else ""
        if target.isidentifier() and target not in defined_outside:
            (loop_locals if in_loop else defined_outside).add(target)
    return leaked


def test_looped_kernels_read_no_loop_local_value_after_its_loop(device, monkeypatch):
    # Force the looped variant on small rows, in the interpreter and on a GPU.
    monkeypatch.setattr(launch_config, "CPU_MAX_BLOCK", 64)
    monkeypatch.setattr(launch_config, "GPU_PERSISTENT_MAX", 64)
    x = torch.randn(5, 300, device=device)
    programs = [lambda t: t.logsumexp(1), softmax, lambda t: torch.var_mean(t, 1), lambda t: t.max(1)]
    for program in programs:
        report = fused_matches_eager(program, x, atol=1e-5, rtol=1e-5)
        looped = [s for s in report.sources if "looped kernel" in s]
        assert looped, "the looped variant was not chosen"
        assert _loop_locals_read_after_their_loop(looped[0]) == set()


def test_a_full_reduction_of_a_large_tensor_splits_into_two_stages(device, monkeypatch):
    monkeypatch.setattr(launch_config, "SPLIT_MIN_COLS", 1000)  # split at test sizes too
    monkeypatch.setattr(launch_config, "CPU_MAX_BLOCK", 256)  # rows longer than a block: looped, then split
    x = torch.randn(3000, 7, device=device)
    report = fused_matches_eager(
        lambda t: (t.sum(), t.amax(), t.amin(), (t > 0).all(), (t > 3).any(), (t * 0.001 + 1).prod()),
        x,
        atol=1e-3,
        rtol=1e-4,
    )
    assert [k.kind for k in report.kernels] == ["split_partials"]
    assert fuser.counters()["kernels_launched"] == 2  # partial results, then their combination


def test_tall_column_reductions_split_and_layer_norm_gradients_stay_right(device, monkeypatch):
    monkeypatch.setattr(launch_config, "SPLIT_MIN_COLS", 1000)
    monkeypatch.setattr(launch_config, "CPU_MAX_BLOCK", 256)
    x, w, b = (torch.randn(s, device=device, requires_grad=True) for s in [(3000, 40), (40,), (40,)])
    grad = torch.randn(3000, 40, device=device)
    fused = torch.autograd.grad(fuser.compile(layer_norm, strict=True)(x, w, b), (x, w, b), grad)
    eager = torch.autograd.grad(layer_norm(x, w, b), (x, w, b), grad)
    for got, want in zip(fused, eager, strict=True):
        torch.testing.assert_close(got, want, atol=1e-3, rtol=1e-4)


@pytest.mark.parametrize("shape", [(1,), (1, 1)])
def test_reductions_over_dims_of_size_one_read_their_input_through_the_row_index(shape, device):
    # Every dim is size 1, so the input looks flat; a row kernel has no flat offset to read it at.
    x = torch.randn(shape, device=device)
    fused_matches_eager(lambda t: (t.sum(-1), t.amax(), torch.erf(t).sum(-1), torch.softmax(t, -1)), x)


def test_the_softmax_and_a_consumer_of_the_sum_of_a_0d_tensor_store_one_value(device):
    # A 0-d row kernel computes values of a row block ([XBLOCK, 1]) that go to one scalar address.
    x = torch.randn((), device=device)
    report = fused_matches_eager(lambda t: (torch.softmax(t, -1), t.sum(-1).neg().neg()), x)
    assert report.eager_calls == []


def test_an_in_place_op_on_a_0d_input_summed_over_dim_minus_1_writes_its_input_back(device):
    def program(t):
        t.abs_()
        return t.sum(-1)

    x = torch.randn((), device=device)
    expected_input = x.clone()
    expected = program(expected_input)
    got = fuser.compile(program, strict=True)(x)
    torch.testing.assert_close(got, expected)
    torch.testing.assert_close(x, expected_input)


def test_reductions_of_two_spaces_that_read_each_others_results_need_no_cyclic_kernels(device):
    # Grouped by node, `d` could join `a`'s kernel: it does not read `a`, but `c`'s kernel (with `b`) does.
    def program(x, y):
        a = x.sum()
        b = (y * a).sum()
        c = y.sum()
        d = (x * c).sum()
        return b, d

    x, y = torch.randn(7, device=device), torch.randn(3, device=device)
    report = fused_matches_eager(program, x, y, atol=1e-5, rtol=1e-5)
    assert report.num_kernels == 3


def test_a_long_float32_row_sums_no_further_from_float64_than_eagers_sum(device):
    # The interpreter folds a row left to right through a combine function unless it is its own sum's.
    torch.manual_seed(0)
    x = torch.randn(3, 20000, device=device) * 3
    exact = x.double().sum(1)
    fused_error = (fuser.compile(lambda t: t.sum(1), strict=True)(x).double() - exact).abs().max().item()
    eager_error = (x.sum(1).double() - exact).abs().max().item()
    assert fused_error <= 4 * eager_error, f"fused {fused_error:.2e}, eager {eager_error:.2e}"


def test_the_logsumexp_of_a_0d_tensor_over_dim_minus_1_is_the_tensor(device):
    # Its decomposition squeezes dim -1 of a 0-d tensor, which names the tensor itself.
    x = torch.randn((), device=device)
    fused_matches_eager(lambda t: torch.logsumexp(t, [-1]), x)


def test_layer_norm_reduces_each_row_three_times_in_one_kernel(device):
    # The decomposition asks for sum(x) (the normalization's mean) and var(x): the variance takes its
    # mean relative to the row's first value (exact on rows of equal values), then its squared
    # deviations. Three reductions of the row held in registers, one kernel.
    x = torch.randn(6, 300, device=device)
    w, b = torch.randn(300, device=device), torch.randn(300, device=device)

    def layer_norm(x, w, b):
        return torch.nn.functional.layer_norm(x, (300,), w, b)

    report = fuser.explain(layer_norm, x, w, b)
    (source,) = report.sources
    assert source.count("tl.reduce(") == 3, source
    torch.testing.assert_close(report.result, layer_norm(x, w, b))


def _sums_beside_a_transposed_slice(t4, g12, m5, x):
    y = (t4 + g12)[:, :, 0:8].transpose(1, 2).clone(memory_format=torch.contiguous_format).view(2, 8, 32)
    v = m5.float().view(2, 8, 32)
    return (v * x).sum([0, 1]), v.sum([0, 1]), y


def test_a_row_kernels_variants_each_bind_their_own_view_sizes(device):
    # Found by the zoo tier in GPT-2's backward under bf16 autocast: a row kernel (sums over the batch) also stores a transposed
    # slice reshaped back. Its persistent and looped variants number their views differently, and the
    # launcher used to bind both from one dict, so one variant read the other's view sizes (nan, 1e38).
    # (Which variant numbers which view first follows the graph's node names: keep the program as is.)
    torch.manual_seed(0)
    args = (
        torch.randn(2, 4, 8, 8).bfloat16().to(device),
        torch.randn(2, 8, 4, 8).bfloat16().transpose(1, 2).to(device),
        torch.randn(16, 32).bfloat16().to(device),
        torch.randn(2, 8, 32).to(device),
    )
    compiled = torch.compile(_sums_beside_a_transposed_slice, backend="fuser")(*args)
    assert fuser.counters()["kernels_launched"] == 1
    torch.testing.assert_close(compiled, _sums_beside_a_transposed_slice(*args), atol=1e-5, rtol=0)


@pytest.mark.opt_in_unvalidated("prod's lowering as changed by the fix, whatever the manifest says")
@pytest.mark.parametrize("reduce", [lambda v: v.prod(-1), lambda v: v.prod()], ids=["prod_dim", "prod"])
def test_a_long_product_with_zeros_through_it_is_a_signed_zero_not_an_overflow(reduce, device):
    # Found by validation's fuzz stage (2026-11-27): a split's float32 partial product of a run without
    # zeros overflowed to inf, and the partials combined to inf * 0 = nan. The product is -0.0 (a zero,
    # no infinity, one negative factor); the partials now accumulate in float64. Eager's own float32
    # order overflows on this row too (nan), so the exact answer is the reference, not eager.
    torch.manual_seed(0)
    x = torch.rand(16411) * 12 + 1
    x[::84] = 0
    x[7] = -x[7]
    got = torch.compile(reduce, backend="fuser")(x.to(device))
    assert fuser.counters()["kernels_launched"] >= 2  # a split reduction: partials, then their product
    assert got.item() == 0.0 and torch.signbit(got).item()


LARGE = [[1.5e19, -1.5e19] * 5, [3.0, 4.0] * 5]  # squares overflow float32's sum; var and std do not


@pytest.mark.parametrize(
    ("program", "values"),
    [
        (lambda t: t.std(-1), LARGE),
        (lambda t: t.var(-1), LARGE),
        # Their means alone: eager's running (Welford) mean of +-1.5e19 is 512 where the exact one is 0.
        (lambda t: torch.var_mean(t, -1)[0], LARGE),
        (lambda t: torch.std_mean(t, -1, keepdim=True)[0], LARGE),
        (lambda t: t.exp().std(-1), [[49, 10, 3]]),  # the fuzzer's program: int64 exponents, a std near 1e21
    ],
    ids=["std", "var", "var_mean", "std_mean", "exp_std"],
)
def test_moments_of_values_whose_squares_overflow_float32_match_the_device(device, program, values):
    # The CPU's var and std kernels accumulate in double and round once (there, a float32 std of values
    # near 1e21 is finite; the fuser's float32 sum of squares was inf: found by the fuzzer); CUDA's
    # accumulate in float. Each device's eager is the answer there.
    fused_matches_eager(program, torch.tensor(values, device=device), rtol=1e-5, atol=0)


def test_only_the_moment_ops_compute_in_double_on_the_cpu(device):
    # ATen's CPU norm kernels accumulate in float: a norm's moments keep the input's precision there, and
    # no moment computes in double on CUDA.
    x = torch.randn(4, 8, device=device)
    programs = {
        "var": lambda t: t.var(-1),
        "layer_norm": lambda t: F.layer_norm(t, (8,)),
        "group_norm": lambda t: F.group_norm(t.reshape(4, 8, 1), 2),
        "batch_norm": lambda t: F.batch_norm(t, None, None, training=True),
    }
    in_double = {name for name, p in programs.items() if "float64" in "\n".join(fuser.explain(p, x).sources)}
    assert in_double == ({"var"} if device == "cpu" else set())


def test_group_norm_of_one_element_groups_keeps_the_bias_exact(device):
    # One element a group: its variance is 0 and rstd = 1 / sqrt(eps) = 316. The stock CPU decomposition's
    # scale-and-shift form, x * (rstd * w) + (b - mean * rstd * w), cancelled two terms of that size: 3x
    # eager's error (the full tier's group_norm into_reduction case). Normalized first, the output is b.
    torch.manual_seed(0)
    x, w, b = (torch.randn(shape, device=device) * 3 for shape in ((37, 7), (7,), (7,)))

    def program(x, w, b):
        return F.group_norm(x, 7, w, b)

    compiled = torch.compile(program, backend="fuser")(x, w, b)
    exact = program(x.double(), w.double(), b.double())
    assert (compiled.double() - exact).abs().max() < 1e-6
