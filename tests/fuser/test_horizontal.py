"""Horizontal fusion (`fuser.horizontal`): a compiled optimizer step over many tensors is one or two
kernels, matches eager `foreach=True`, and one compiled kernel serves any number of tensors."""

from __future__ import annotations

import pytest
import torch

import fuser

# Mixed sizes, with an empty and a one-element tensor among them.
SIZES = [1 + (i * 263) % 3000 for i in range(12)] + [0, 1]


def _adamw(params, compiled):
    # capturable (a tensor lr) is what compiles well; eager supports it only on accelerators, so the
    # eager reference is the same optimizer with a float lr.
    if compiled:
        return torch.optim.AdamW(
            params, lr=torch.tensor(1e-2), weight_decay=0.1, foreach=True, capturable=True
        )
    return torch.optim.AdamW(params, lr=1e-2, weight_decay=0.1, foreach=True)


OPTIMIZERS = {
    "adam": lambda params, compiled: torch.optim.Adam(params, lr=1e-2, foreach=True),
    "adam_amsgrad": lambda params, compiled: torch.optim.Adam(params, lr=1e-2, amsgrad=True, foreach=True),
    "adamw_capturable": _adamw,
    "adamw_amsgrad": lambda params, compiled: torch.optim.AdamW(params, lr=1e-2, amsgrad=True, foreach=True),
    "sgd_momentum": lambda params, compiled: torch.optim.SGD(params, lr=1e-2, momentum=0.9, foreach=True),
    "sgd_nesterov_weight_decay": lambda params, compiled: torch.optim.SGD(
        params, lr=1e-2, momentum=0.9, nesterov=True, weight_decay=0.1, foreach=True
    ),
}


@pytest.fixture(autouse=True)
def horizontal_on(monkeypatch):
    # On CUDA the fuser leaves horizontal fusion off until a recorded GPU run validates it: these
    # tests are that validation wherever they run.
    monkeypatch.setenv("FUSER_HORIZONTAL", "1")


def _params(device, sizes=SIZES, dtypes=(torch.float32,)):
    generator = torch.Generator().manual_seed(0)
    return [
        torch.randn(size, generator=generator, dtype=dtypes[i % len(dtypes)]).to(device).requires_grad_()
        for i, size in enumerate(sizes)
    ]


def _run(make, params, compiled, steps=5):
    optimizer = make(params, compiled)
    step = torch.compile(optimizer.step, backend="fuser") if compiled else optimizer.step
    generator = torch.Generator().manual_seed(1)
    for _ in range(steps):
        for p in params:
            p.grad = torch.randn(p.shape, generator=generator).to(p.dtype).to(p.device)
        step()
    return optimizer, step


def test_adam_over_50_tensors_of_mixed_sizes_is_at_most_two_kernels(device):
    params = _params(device, sizes=[1 + (i * 97) % 2000 for i in range(50)])
    _, step = _run(OPTIMIZERS["adam"], params, compiled=True, steps=2)
    fuser.reset_counters()
    step()
    counts = fuser.counters()
    assert counts["kernels_launched"] <= 2, counts
    assert counts["extern_calls"] == 0 and counts["fallbacks"] == 0, counts


def test_without_horizontal_fusion_the_foreach_ops_stay_whole_and_run_eagerly(device):
    params = _params(device, sizes=[1 + (i * 97) % 2000 for i in range(10)])
    optimizer = torch.optim.Adam(params, lr=1e-2, foreach=True)
    step = torch.compile(optimizer.step, backend="fuser", options={"horizontal": False})
    for _ in range(2):
        for p in params:
            p.grad = torch.ones_like(p)
        step()
    fuser.reset_counters()
    step()
    # Decomposing foreach ops pays only where horizontal fusion batches the per-tensor kernels: without
    # it they stay foreach calls (eager), and only the step counts' per-tensor adds are kernels.
    counts = fuser.counters()
    assert counts["extern_calls"] > 0
    assert counts["kernels_launched"] == len(params)


def test_a_second_optimizer_with_another_number_of_tensors_reuses_the_compiled_kernels(device):
    first = _params(device, sizes=[3, 70, 500, 1])
    _run(OPTIMIZERS["adamw_capturable"], first, compiled=True, steps=2)
    compiled_before = fuser.counters()["kernels_compiled"]
    second = _params(device, sizes=[9, 2, 1200, 64, 5, 1, 300])
    _, step = _run(OPTIMIZERS["adamw_capturable"], second, compiled=True, steps=2)
    counts = fuser.counters()
    assert counts["graphs_compiled"] >= 2  # Dynamo traced the second optimizer anew
    assert counts["kernels_compiled"] == compiled_before, counts
    fuser.reset_counters()
    step()
    assert fuser.counters()["kernels_launched"] <= 2


def test_kernels_of_one_source_over_different_dtypes_are_not_batched(device):
    # The two negations generate the same source (pointer dtypes are the launch's arguments), but one
    # horizontal kernel casts its addresses to one dtype: an int64 tensor read as float32 came out wrong.
    def negate_both(a, b):
        return torch.neg(a), torch.neg(b)

    a = torch.randn(7, device=device)
    b = torch.randint(-100, 100, (5,), dtype=torch.int64, device=device)
    report = fuser.explain(negate_both, a, b)
    assert report.num_kernels == 2
    torch.testing.assert_close(report.result, negate_both(a, b))
