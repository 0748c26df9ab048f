"""Mutations written in place (`fuser.plan.inplace`): a kernel stores a mutated graph input's new value
straight into it, with no `copy_` after it, and leaves the copy eager wherever that could be wrong."""

from __future__ import annotations

import logging

import pytest
import torch
from shared_checks import fused_matches_eager

import fuser
from fuser.plan import inplace


@pytest.fixture(autouse=True)
def horizontal_on(monkeypatch):
    monkeypatch.setenv("FUSER_HORIZONTAL", "1")


def _adam_step_counts(device, sizes):
    params = [torch.randn(n, device=device, requires_grad=True) for n in sizes]
    optimizer = torch.optim.Adam(params, lr=1e-2, foreach=True)
    step = torch.compile(optimizer.step, backend="fuser")
    for p in params:
        p.grad = torch.randn_like(p)
    before = [p.data_ptr() for p in params]
    step()
    step()
    fuser.reset_counters()
    step()
    assert [p.data_ptr() for p in params] == before
    return fuser.counters()


def test_an_adam_step_writes_parameters_and_state_in_place_with_no_copies(device, monkeypatch):
    sizes = [3, 70, 500, 1]
    counts = _adam_step_counts(device, sizes)
    assert counts["kernels_launched"] == 2 and counts["extern_calls"] == 0, counts
    # Without folding, each parameter, exp_avg, exp_avg_sq and step is copied back by an eager copy_.
    torch._dynamo.reset()
    monkeypatch.setattr(inplace, "fold", lambda plan, generated: (plan, {}))
    counts = _adam_step_counts(device, sizes)
    assert counts["kernels_launched"] == 2 and counts["extern_calls"] == 4 * len(sizes), counts


def test_members_stored_into_inputs_another_member_reads_see_the_old_values(device):
    # m1 is stored into a, m2 reads a: loaded after a's store, it would read m1 (a swap came out 2b, 2b+1).
    def swap_ish(a, b):
        m1 = b * 2
        m2 = a + 1
        a.copy_(m1)
        b.copy_(m2)

    a, b = torch.randn(33, device=device), torch.randn(33, device=device)
    fused_matches_eager(swap_ish, a, b)
    assert fuser.counters()["extern_calls"] == 0


def test_a_reader_of_the_old_value_after_the_writing_kernel_keeps_the_copy_eager(device, caplog):
    def update_and_use_old(x):
        y = x * 2
        out = x + torch.cumsum(y, 0)  # reads x's old value after y's kernel (cumsum runs eager)
        x.copy_(y)
        return out

    with caplog.at_level(logging.INFO, logger="fuser"):
        fused_matches_eager(update_and_use_old, torch.randn(50, device=device))
    assert "reads its target's old value after the writing kernel" in caplog.text
    (reason,) = [r for op, r in fuser.explain(update_and_use_old, torch.randn(50)).fallbacks if "copy_" in op]
    assert reason == "not written in place: add reads its target's old value after the writing kernel"


def test_a_new_value_that_is_also_returned_does_not_alias_the_input(device, caplog):
    def update_and_return(x):
        y = x * 2
        x.copy_(y)
        return y

    x = torch.randn(10, device=device)
    with caplog.at_level(logging.INFO, logger="fuser"):
        y = fused_matches_eager(update_and_return, x).result
    assert y.data_ptr() != x.data_ptr()
    assert "also a graph output" in caplog.text


def test_overlapping_views_of_one_buffer_are_mutated_as_eager_does(device):
    def mutate_one_read_other(a, b):
        a.mul_(2)
        return b + 1

    base = torch.randn(8, device=device)
    expected_base = base.clone()
    expected = mutate_one_read_other(expected_base[:6], expected_base[2:])
    got = torch.compile(mutate_one_read_other, backend="fuser")(base[:6], base[2:])
    torch.testing.assert_close(got, expected)
    torch.testing.assert_close(base, expected_base)


def test_sgd_over_parameters_that_are_views_of_one_flat_buffer_matches_eager(device):
    def run(compiled):
        flat = torch.arange(60.0, device=device) / 10
        params = [flat[:10].detach(), flat[10:40].view(5, 6).detach(), flat[40:].detach()]
        for p in params:
            p.requires_grad_()
        optimizer = torch.optim.SGD(params, lr=0.1, momentum=0.9, foreach=True)
        step = torch.compile(optimizer.step, backend="fuser") if compiled else optimizer.step
        for i in range(3):
            for p in params:
                p.grad = torch.full_like(p, float(i + 1))
            step()
        return flat

    torch.testing.assert_close(run(True), run(False))


@pytest.mark.parametrize(
    "source",
    [lambda x: x.double() * 3, lambda x: (x[:1] * 3).bfloat16(), lambda x: x.t().contiguous().t() + 1],
    ids=["cast", "broadcast", "transposed"],
)
def test_copy_into_an_input_casts_and_broadcasts_as_eager_does(device, source):
    def copy_into(x):
        x.copy_(source(x))

    fused_matches_eager(copy_into, torch.randn(4, 4, device=device))


def _kernel_code_check(program, *inputs):
    """What `fuser.plan.inplace` reads from the writing kernel's statements, for each copy_ it considers."""
    seen = []
    obstacle = inplace._obstacle

    def recording(copy, units, generated):
        target, source = copy.args
        kernel = units[source][1]
        if kernel is not None and generated.variants(kernel):
            at = kernel.members.index(source)
            seen.append(
                all(inplace._reads_where_it_writes(v, target, at) for v in generated.variants(kernel))
            )
        return obstacle(copy, units, generated)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(inplace, "_obstacle", recording)
        torch.compile(program, backend="fuser")(*inputs)
    return seen


def test_the_writing_kernel_s_code_is_checked_to_read_its_target_where_it_writes():
    # x * 2 into x reads each element where it is written; x.t() + 1 into x reads the transposed element
    # (the graph rule keeps that copy eager already: a view; the code check says the same from the IR).
    assert _kernel_code_check(lambda x: x.copy_(x * 2), torch.randn(5, 5)) == [True]
    assert _kernel_code_check(lambda x: x.copy_(x.t() + 1), torch.randn(5, 5)) == [False]
