"""Probe (issue 16 follow-up): index_fill.int_Tensor's gradient for `value` under the fuser on CUDA.

    FUSER_UNVALIDATED=fuse FUSER_LOG=1 python tools/probes/index_fill_cuda.py

Prints the backward graph the fuser receives, its log, and the compiled against eager gradient.
"""

import torch
from functorch.compile import make_boxed_func
from torch._dynamo.backends.common import aot_autograd

import fuser


def program(x, v, idx):
    return torch.ops.aten.index_fill.int_Tensor(x, 0, idx, v)


def main():
    device = "cuda" if torch.cuda.is_available() else "cpu"
    x = torch.randn(37, 7, device=device, requires_grad=True)
    v = torch.tensor(2.0, device=device, requires_grad=True)
    idx = torch.tensor([3, 5, 3, 0], device=device)
    g = torch.randn(37, 7, device=device)
    program(x, v, idx).backward(g)
    want = v.grad.clone()
    v.grad = None

    def show(gm, example_inputs):
        print(gm.code)
        for node in gm.graph.nodes:  # the shapes the fuser plans with
            value = node.meta.get("val")
            print(f"  {node.name}: {getattr(value, 'shape', value)}")
        return make_boxed_func(gm.forward)

    torch.compile(program, backend=aot_autograd(fw_compiler=show, bw_compiler=show))(x, v, idx).backward(g)
    v.grad = None
    torch._dynamo.reset()
    torch.compile(program, backend="fuser")(x, v, idx).backward(g)
    print("value's gradient: fuser", v.grad.item(), "eager", want.item(), fuser.counters())


def replica(tangents, indices):
    """The backward graph above, as a program Dynamo captures whole (its _unique has a data-dependent size)."""
    aten = torch.ops.aten
    filled = aten.index_fill.int_Scalar(tangents, 0, indices, 0)
    unique = aten._unique.default(indices, False)[0]
    return filled, aten.index_select.default(tangents, 0, unique).sum()


def explain_replica():
    device = "cuda" if torch.cuda.is_available() else "cpu"
    torch._dynamo.reset()
    torch._dynamo.config.capture_dynamic_output_shape_ops = True
    g = torch.randn(37, 7, device=device)
    idx = torch.tensor([3, 5, 3, 0], device=device)
    report = fuser.explain(replica, g, idx)
    print(report)
    print(
        "replica: fuser",
        [t.sum().item() for t in report.result],
        "eager",
        [t.sum().item() for t in replica(g, idx)],
    )


if __name__ == "__main__":
    main()
    explain_replica()
