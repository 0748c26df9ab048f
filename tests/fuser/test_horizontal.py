"""Horizontal fusion (`fuser.plan.horizontal`) apart from optimizers: which kernels it may batch. What it does
for a compiled optimizer step (one or two kernels, any number of tensors) is in test_optimizers.py."""

from __future__ import annotations

import pytest
import torch

import fuser


@pytest.fixture(autouse=True)
def horizontal_on(monkeypatch):
    # On CUDA the fuser leaves horizontal fusion off until a recorded GPU run validates it: these
    # tests are that validation wherever they run.
    monkeypatch.setenv("FUSER_HORIZONTAL", "1")


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


def test_kernels_are_grouped_on_their_ir_and_only_the_horizontal_kernel_is_printed(device, monkeypatch):
    # Grouping compares the parts' statements (`fuser.plan.horizontal._key`): a part that joins a group
    # is never printed, and neither is a kernel the groups replaced. What is printed is what runs.
    from fuser.emit import codegen

    def scale_all(a, b, c):
        return a * 2.0, b * 2.0, c * 2.0

    inputs = [torch.randn(size, device=device) for size in (7, 300, 33)]
    # Once unwatched: where fuser/ has changed since its fingerprints were written, the first compile
    # validates its ops by printing their probes' kernels (`fuser.validate.probes`).
    fuser.explain(scale_all, *inputs)
    printed_kinds = []
    print_function = codegen.KernelSource.function.func

    def printing(self):
        printed_kinds.append(self.kind)
        return print_function(self)

    monkeypatch.setattr(codegen.KernelSource, "function", property(printing))
    report = fuser.explain(scale_all, *inputs)
    assert [k.kind for k in report.kernels] == ["horizontal"]
    assert set(printed_kinds) == {"horizontal"}, printed_kinds
    torch.testing.assert_close(report.result, scale_all(*inputs))
