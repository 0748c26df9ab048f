"""The fuser's settings of Triton's interpreter (CPU): what they change, and what they must not."""

from __future__ import annotations

import torch
from triton.runtime import interpreter


def test_the_interpreter_skips_its_dead_overflow_checks():
    # The int64 overflow check Triton's interpreter computes around int32 arithmetic is dropped unless
    # `debug` is on (it never is there): the fuser turns it off, and the kernel computes the same.
    x = torch.arange(-6, 6, dtype=torch.int32).reshape(3, 4).t()
    torch._dynamo.reset()
    out = torch.compile(lambda v: v * 3 + 1, backend="fuser")(x)
    assert torch.equal(out, x * 3 + 1)
    options = interpreter.interpreter_builder.options
    assert not options.debug and not options.sanitize_overflow
