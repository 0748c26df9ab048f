"""The model-block tier (`--conformance-tier models`): the suite's own model blocks through a backend, against float64.

Run it with `nox -s conformance -- --conformance-tier models` (or `pytest conformance/test_blocks.py --conformance-backend ...
--conformance-device ...`). Each case is one block in one precision: the loss and every parameter's gradient against
float64 eager, with the zoo's eager-relative verdict. A failure names the first node of the block's
graph that disagrees.
"""

from __future__ import annotations

import contextlib

import pytest
import torch

from conformance import plugin
from conformance.harness.bisect import first_disagreeing_node
from conformance.harness.blocks import BLOCKS, PRECISIONS
from conformance.harness.policy import BUDGETS
from conformance.harness.runner import resolve_backend
from conformance.zoo.check import check_model


@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize("block", BLOCKS, ids=lambda block: block.name)
def test_block_matches_eager(block, precision, request) -> None:
    backend_name, device = plugin.get(request.config, "backend"), plugin.get(request.config, "device")
    backend = resolve_backend(backend_name)
    result = check_model(block, backend, precision, device)
    if result.kernels == 0:  # conformance.harness.probe: None where the backend cannot say
        pytest.fail(f"{block.name} {precision}: {backend_name} launched no kernel, so nothing was checked")
    if not result.ok:
        where = first_disagreeing_node(_loss_fn(block, precision, device), backend, BUDGETS[precision])
        raise AssertionError(f"{block.name} {precision}: {result.problem}\n  first disagreement: {where}")


def _loss_fn(block, precision: str, device: str):
    # The block's loss as a closure over seeded weights and batch, as check_model builds them.
    torch.manual_seed(0)
    model = block.build().to(device).train()
    batch = {k: v.to(device) for k, v in block.batch().items()}
    if precision == "bf16-params":
        model = model.bfloat16()
        batch = {k: v.bfloat16() if v.is_floating_point() else v for k, v in batch.items()}

    def loss() -> torch.Tensor:
        autocast = torch.autocast(device, torch.bfloat16) if precision == "bf16" else contextlib.nullcontext()
        with autocast:
            return block.loss(model, batch)

    return loss
