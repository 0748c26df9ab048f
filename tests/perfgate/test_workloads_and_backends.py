"""Workloads run on every backend and count bytes one way; backends travel to the callgrind process."""

from __future__ import annotations

import pytest
import torch

from perfgate.backends import BACKENDS, Backend, compile_with_fuser
from perfgate.measure import count_on_cpu
from perfgate.workloads import WORKLOADS, Step, Workload, fewest_bytes


@pytest.mark.parametrize("name", sorted(WORKLOADS))
def test_every_workload_makes_the_same_outputs_on_the_fuser_as_on_eager(name):
    workload = WORKLOADS[name]
    fused = Step(workload, BACKENDS["fuser"].compile(workload.program), workload.inputs("cpu", "cpu"))()
    eager = Step(workload, workload.program, workload.inputs("cpu", "cpu"))()
    assert [(t.shape, t.dtype) for t in fused] == [(t.shape, t.dtype) for t in eager]


def test_the_fuser_counts_its_launches_and_the_other_backends_have_none_on_cpu():
    chain = WORKLOADS["pointwise_chain"]
    assert count_on_cpu(chain, BACKENDS["fuser"])["kernel_launches"].median == 1
    counted = count_on_cpu(chain, BACKENDS["eager"])
    assert counted["kernel_launches"] is None
    assert counted["bytes_moved"].median == 3 * 5 * 129 * 2  # two bf16 inputs read, one output written


def test_fewest_bytes_counts_a_tensor_read_twice_or_returned_as_a_view_of_itself_once():
    x = torch.zeros(4, 8)
    assert fewest_bytes([x, x], [x.view(4, 8)]) == x.numel() * 4
    assert fewest_bytes([x], [x[:2]]) == x.numel() * 4 + x[:2].numel() * 4


def test_a_training_step_returns_gradients_and_never_accumulates_them():
    workload = WORKLOADS["add_layer_norm_backward"]
    inputs = workload.inputs("cpu_tiny", "cpu")
    step = Step(workload, workload.program, inputs)
    first, second = step(), step()
    assert len(first) == 2 + 4  # hidden and normed, then the grads of x, residual, weight and bias
    assert all(t.grad is None for t in inputs)
    for a, b in zip(first, second, strict=True):
        torch.testing.assert_close(a, b)


def test_a_workload_must_name_all_four_sizes():
    with pytest.raises(ValueError, match="sizes must be exactly"):
        Workload("w", "missing tiny sizes", torch.neg, lambda rows, device: [], {"gpu": {}, "cpu": {}})


def test_a_backend_travels_to_another_process_as_its_file_and_function_name():
    spec = BACKENDS["fuser"].to_json()
    assert spec["file"].endswith("perfgate/backends.py") and spec["function"] == "compile_with_fuser"
    travelled = Backend.from_json(spec)
    assert travelled.name == "fuser" and travelled.counted_by_fuser
    assert travelled.compile.__code__.co_code == compile_with_fuser.__code__.co_code


def test_a_backend_made_from_a_lambda_cannot_travel_to_callgrind():
    with pytest.raises(ValueError, match="top-level function"):
        Backend("fuser", lambda program: program).to_json()


@pytest.mark.parametrize(("name", "per_parameter"), [("adam_step", 28), ("sgd_momentum_step", 20)])
def test_an_optimizer_step_moves_each_parameter_and_its_state_once_each_way(name, per_parameter):
    # AdamW reads param, grad, exp_avg, exp_avg_sq and writes three of them, plus a 4-byte step count
    # read and written per parameter; SGD with momentum reads param, grad, buffer and writes two.
    workload = WORKLOADS[name]
    inputs = workload.inputs("cpu_tiny", "cpu")
    elements = sum(p.numel() for p in inputs[0])
    counts = 8 * len(inputs[0]) if name == "adam_step" else 0
    assert Step(workload, workload.program, inputs).fewest_bytes([]) == per_parameter * elements + counts


def test_cross_entropy_reads_bf16_logits_and_int64_targets_once_and_writes_one_fp32_loss():
    workload = WORKLOADS["cross_entropy"]
    logits, targets = workload.inputs("cpu_tiny", "cpu")
    assert (logits.dtype, targets.dtype, targets.shape) == (torch.bfloat16, torch.int64, (2,))
    step = Step(workload, workload.program, [logits, targets])
    assert step.fewest_bytes(step()) == 2 * 16 * 2 + 2 * 8 + 4
