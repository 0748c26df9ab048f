"""Compiled `torch.optim` steps against eager `foreach=True`: parameters and state after 5 steps, for
every optimizer issue 13 names, in foreach and capturable forms, with float and tensor learning rates
and `maximize`, over a parameter list holding an empty, a one-element and a non-contiguous tensor."""

from __future__ import annotations

import pytest
import torch

import fuser

optim = torch.optim


def lr(compiled: bool, params: list[torch.Tensor]) -> torch.Tensor | float:
    # Eager foreach takes a tensor lr only when capturable, and capturable only on accelerators: the
    # compiled step gets a tensor on the parameters' device (what compiles well), eager the same value
    # as a float.
    return torch.tensor(1e-2, device=params[0].device) if compiled else 1e-2


# name -> (make(params, compiled), eager calls expected per step). A capturable optimizer is compared
# with the same optimizer not capturable: eager CPU rejects capturable, and the arithmetic is the same.
OPTIMIZERS = {
    "adam": (lambda p, c: optim.Adam(p, lr=1e-2, foreach=True), 0),
    "adam_capturable_tensor_lr": (lambda p, c: optim.Adam(p, lr=lr(c, p), foreach=True, capturable=c), 0),
    "adamw_maximize": (
        lambda p, c: optim.AdamW(p, lr=1e-2, weight_decay=0.1, maximize=True, foreach=True),
        0,
    ),
    "adamw_amsgrad_capturable": (
        lambda p, c: optim.AdamW(p, lr=lr(c, p), amsgrad=True, foreach=True, capturable=c),
        0,
    ),
    "sgd_momentum_tensor_lr": (
        lambda p, c: optim.SGD(p, lr=torch.tensor(1e-2, device=p[0].device), momentum=0.9, foreach=True),
        0,
    ),
    "sgd_nesterov_weight_decay_maximize": (
        lambda p, c: optim.SGD(
            p, lr=1e-2, momentum=0.9, nesterov=True, weight_decay=0.1, maximize=True, foreach=True
        ),
        0,
    ),
    "adagrad": (lambda p, c: optim.Adagrad(p, lr=1e-2, lr_decay=0.01, weight_decay=0.1, foreach=True), 0),
    "rmsprop_centered_momentum": (
        lambda p, c: optim.RMSprop(p, lr=1e-2, momentum=0.5, centered=True, foreach=True),
        0,
    ),
    "rmsprop_capturable_maximize": (
        lambda p, c: optim.RMSprop(p, lr=1e-2, maximize=True, foreach=True, capturable=c),
        0,
    ),
    "adamax": (lambda p, c: optim.Adamax(p, lr=1e-2, weight_decay=0.1, foreach=True), 0),
    "adamax_capturable": (lambda p, c: optim.Adamax(p, lr=1e-2, foreach=True, capturable=c), 0),
    "nadam": (lambda p, c: optim.NAdam(p, lr=1e-2, foreach=True), 0),
    "nadam_capturable_decoupled": (
        lambda p, c: optim.NAdam(
            p, lr=1e-2, weight_decay=0.1, decoupled_weight_decay=True, foreach=True, capturable=c
        ),
        0,
    ),
    # RAdam's rectification (torch.where(rho > 5, n, 0.0)) makes scalar_tensor calls: fused since
    # scalar_tensor is lowered (three per parameter ran eagerly before, 2026-11-26 session 6).
    "radam": (lambda p, c: optim.RAdam(p, lr=1e-2, foreach=True), 0),
    "radam_capturable": (lambda p, c: optim.RAdam(p, lr=1e-2, foreach=True, capturable=c), 0),
}


@pytest.fixture(autouse=True)
def horizontal_on(monkeypatch):
    # On CUDA horizontal fusion is opt-in (fuser.options): these tests are of the fused step wherever
    # they run, and of the CUDA graphs that come with it there.
    monkeypatch.setenv("FUSER_HORIZONTAL", "1")


def make_params(device, dtype=torch.float32):
    """Mixed sizes, an empty and a one-element tensor, and a transposed (non-contiguous) matrix."""
    generator = torch.Generator().manual_seed(0)
    params = [torch.randn(n, generator=generator) for n in (7, 300, 1, 0)]
    params.append(torch.randn(6, 4, generator=generator).t())
    return [p.to(device=device, dtype=dtype).requires_grad_() for p in params]


def sized_params(device, sizes):
    generator = torch.Generator().manual_seed(0)
    return [torch.randn(size, generator=generator).to(device).requires_grad_() for size in sizes]


def run(make, params, compiled, steps=5):
    """`steps` optimizer steps with seeded gradients: the optimizer and each step's counters."""
    optimizer = make(params, compiled)
    step = torch.compile(optimizer.step, backend="fuser") if compiled else optimizer.step
    generator = torch.Generator().manual_seed(1)
    counts = []
    for _ in range(steps):
        for p in params:
            p.grad = torch.randn(p.shape, generator=generator).to(p.dtype).to(p.device)
        fuser.reset_counters()
        step()
        counts.append(fuser.counters())
    return optimizer, counts


def state(optimizer) -> list[torch.Tensor]:
    return [
        value
        for p in optimizer.param_groups[0]["params"]
        for _, value in sorted(optimizer.state[p].items())
        if isinstance(value, torch.Tensor)
    ]


def assert_matches_eager(make, params, **tolerance):
    """The compiled step's parameters and state equal eager's after 5 steps; its last step's counters."""
    reference = [p.detach().clone().requires_grad_() for p in params]
    compiled, counts = run(make, params, compiled=True)
    eager, _ = run(make, reference, compiled=False)
    counts = counts[-1]
    assert counts["kernels_launched"] >= 1, f"no kernel ran: eager checked against eager ({counts})"
    for got, want in zip(params, reference, strict=True):
        torch.testing.assert_close(got.detach(), want.detach(), **tolerance)
    assert len(state(compiled)) == len(state(eager))
    for got, want in zip(state(compiled), state(eager), strict=True):
        # A compiled step keeps its step counts on the parameters' device, eager on the CPU.
        torch.testing.assert_close(got.to(want.device, want.dtype).reshape(want.shape), want, **tolerance)
    return counts


@pytest.mark.parametrize("name", OPTIMIZERS)
def test_an_optimizer_step_matches_eager_foreach_after_five_steps(name, device):
    make, eager_calls = OPTIMIZERS[name]
    params = make_params(device)
    counts = assert_matches_eager(make, params)
    # The step really ran through the fuser's kernels (a step Dynamo left eager would pass vacuously):
    # two at most, one more for the transposed parameter's layout, and no eager calls but those expected.
    assert 1 <= counts["kernels_launched"] <= 3, counts
    assert counts["extern_calls"] == eager_calls, counts
    assert params[4].stride() == (1, 4)


def test_radams_rectification_is_fused_with_nothing_left_eager(device):
    params = make_params(device)[:2]
    for p in params:
        p.grad = torch.ones_like(p)
    report = fuser.explain(optim.RAdam(params, lr=1e-2, foreach=True).step)
    assert report.fallbacks == [] and report.eager_calls == []
    assert report.num_kernels == 2


def test_bf16_gradients_of_fp32_parameters_are_refused_by_torch_compile_itself():
    # Eager foreach SGD, Adagrad and RMSprop take them on the CPU (with grad_dtype = None; eager CUDA
    # refuses them); torch 2.13's Dynamo refuses them while tracing, for any backend. When a torch takes
    # them, cover them above instead.
    device = "cpu"
    if not hasattr(torch.Tensor, "grad_dtype"):
        pytest.skip("this torch has no Tensor.grad_dtype: a gradient must have its parameter's dtype")
    param = torch.randn(5, device=device, requires_grad=True)
    param.grad_dtype = None
    param.grad = torch.randn(5, device=device).bfloat16()
    optimizer = optim.SGD([param], lr=0.1, momentum=0.9, foreach=True)
    try:
        optimizer.step()  # eager takes it (torch 2.13; 2.11's foreach refuses the mix as well)
    except RuntimeError as error:
        assert "same dtype" in str(error)
        eager_takes = False
    else:
        eager_takes = True
    with pytest.raises(Exception, match="grad_dtype" if eager_takes else None):
        torch.compile(optimizer.step, backend="eager")()


def test_mixed_dtypes_and_a_non_contiguous_parameter_match_eager(device):
    # Adam keeps a gradient in its parameter's dtype (eager's foreach lerp rejects bf16 grads of fp32
    # params), so mixed dtypes are fp32 and bf16 parameters in one optimizer: a group per dtype mix.
    params = [
        torch.randn(n).to(device=device, dtype=dtype).requires_grad_()
        for n, dtype in zip((5, 700, 1, 0, 33), (torch.float32, torch.bfloat16) * 3, strict=False)
    ]
    transposed = torch.randn(40, 30).to(device).t().detach().requires_grad_()
    assert not transposed.is_contiguous()
    params.append(transposed)
    assert_matches_eager(
        lambda params, compiled: torch.optim.AdamW(params, lr=1e-2, amsgrad=True, foreach=True),
        params,
        rtol=2e-2,
        atol=1e-2,
    )
    assert transposed.stride() == (1, 30)


# --- horizontal fusion: how many kernels a step is, and one compiled kernel for any tensor list ---------


def adamw_capturable(params, compiled):
    return optim.AdamW(params, lr=lr(compiled, params), weight_decay=0.1, foreach=True, capturable=compiled)


def test_adam_over_50_tensors_of_mixed_sizes_is_at_most_two_kernels(device):
    params = sized_params(device, [1 + (i * 97) % 2000 for i in range(50)])
    _, counts = run(OPTIMIZERS["adam"][0], params, compiled=True, steps=3)
    assert counts[-1]["kernels_launched"] <= 2, counts[-1]
    assert counts[-1]["extern_calls"] == 0 and counts[-1]["fallbacks"] == 0, counts[-1]


def test_without_horizontal_fusion_the_foreach_ops_stay_whole_and_run_eagerly(device):
    params = sized_params(device, [1 + (i * 97) % 2000 for i in range(10)])
    optimizer = torch.optim.Adam(params, lr=1e-2, foreach=True)
    step = torch.compile(optimizer.step, backend="fuser", options={"horizontal": False})
    for _ in range(2):
        for p in params:
            p.grad = torch.ones_like(p)
        step()
    fuser.reset_counters()
    step()
    # Decomposing foreach ops pays only where horizontal fusion batches the per-tensor kernels: without
    # it they stay foreach calls (eager), and only the step counts' per-tensor adds can be kernels (on
    # the CPU; on CUDA a non-capturable step keeps its counts on the CPU, where a foreach add does them).
    counts = fuser.counters()
    assert counts["extern_calls"] > 0
    assert counts["kernels_launched"] == (len(params) if params[0].device.type == "cpu" else 0), counts


def test_a_second_optimizer_with_another_number_of_tensors_reuses_the_compiled_kernels(device):
    _, first = run(adamw_capturable, sized_params(device, [3, 70, 500, 1]), compiled=True, steps=2)
    second_params = sized_params(device, [9, 2, 1200, 64, 5, 1, 300])
    _, second = run(adamw_capturable, second_params, compiled=True, steps=3)
    assert sum(c["graphs_compiled"] for c in first + second) >= 2  # Dynamo traced the second anew
    assert sum(c["kernels_compiled"] for c in second) == 0, second
    assert second[-1]["kernels_launched"] <= 2


def test_a_parameter_given_new_storage_between_steps_is_updated_there(device):
    # The horizontal kernel's table of addresses is kept from call to call while no address changes: a
    # parameter whose .data is replaced keeps its identity (Dynamo does not recompile) but moves, and
    # the step must write to where it is now, as eager does.
    params = sized_params(device, [5, 300, 1, 64])
    reference = [p.detach().clone().requires_grad_() for p in params]
    optimizers = [adamw_capturable(ps, compiled) for ps, compiled in ((params, True), (reference, False))]
    compiled_step = torch.compile(optimizers[0].step, backend="fuser")
    generator = torch.Generator().manual_seed(2)
    for number in range(5):
        if number == 3:
            for ps in (params, reference):
                ps[1].data = ps[1].data.clone() + 1  # same values + 1, new storage
        for p, r in zip(params, reference, strict=True):
            grad = torch.randn(p.shape, generator=generator).to(device)
            p.grad, r.grad = grad.clone(), grad.clone()
        compiled_step()
        optimizers[1].step()
    for got, want in zip(params, reference, strict=True):
        torch.testing.assert_close(got.detach(), want.detach())


@pytest.mark.parametrize("name", ["adamw_capturable", "sgd_momentum_tensor_lr"])
def test_a_step_whose_tensors_stay_put_is_replayed_as_a_cuda_graph_on_a_gpu(name, device):
    # Gradients written in place (as a training loop's backward accumulates into .grad) keep every
    # address: from the third call on, the step is a CUDA graph's replay (fuser.runtime.cuda_graphs) on CUDA,
    # and the launches it replays are still counted. The CPU has no graphs: every step runs as usual.
    make = adamw_capturable if name == "adamw_capturable" else OPTIMIZERS[name][0]
    params = sized_params(device, [5, 300, 1, 64, 0])
    reference = [p.detach().clone().requires_grad_() for p in params]
    optimizers = [make(params, True), make(reference, False)]
    compiled_step = torch.compile(optimizers[0].step, backend="fuser")
    generator = torch.Generator().manual_seed(3)
    for p, r in zip(params, reference, strict=True):
        p.grad, r.grad = torch.zeros_like(p), torch.zeros_like(r)
    for _ in range(6):
        for p, r in zip(params, reference, strict=True):
            grad = torch.randn(p.shape, generator=generator).to(device)
            p.grad.copy_(grad)
            r.grad.copy_(grad)
        fuser.reset_counters()
        compiled_step()
        optimizers[1].step()
    counts = fuser.counters()
    assert counts["graph_replays"] == (1 if device == "cuda" else 0), counts
    assert 1 <= counts["kernels_launched"] <= 2 and counts["extern_calls"] == 0, counts
    for got, want in zip(params, reference, strict=True):
        torch.testing.assert_close(got.detach(), want.detach())
    for got, want in zip(state(optimizers[0]), state(optimizers[1]), strict=True):
        torch.testing.assert_close(got.to(want.device, want.dtype).reshape(want.shape), want)


def test_same_shape_parameters_sharing_a_learning_rate_get_one_kernel_source_for_any_count(device):
    # Same-shape parameters' updates land in one kernel of the partitioner, and each reads the same
    # learning-rate and bias-correction values; that shared intermediate once kept them together as one
    # horizontal part, so the kernel's source held every such parameter's update: 100 of them took 264 s
    # to compile for sm_90. Each parameter is its own part: the source is the same for 4 or 12 of them.
    def kernel_sources(count):
        params = [torch.randn(*((3, 5) if i % 2 else (5,))).to(device).requires_grad_() for i in range(count)]
        for p in params:
            p.grad = torch.randn_like(p)
        optimizer = optim.AdamW(params, lr=torch.tensor(1e-2, device=device), foreach=True, capturable=True)
        sources = fuser.explain(optimizer.step).sources
        return sorted(
            "\n".join(line for line in source.splitlines() if not line.startswith("#")) for source in sources
        )

    assert kernel_sources(4) == kernel_sources(12)
