"""The fuser's settings of Triton's interpreter (CPU): what they change, and what they must not."""

from __future__ import annotations

import torch
from triton.runtime import interpreter

import fuser
from fuser.runtime import launch_config


def test_the_interpreter_skips_its_dead_overflow_checks():
    # The int64 overflow check Triton's interpreter computes around int32 arithmetic is dropped unless
    # `debug` is on (it never is there): the fuser turns it off, and the kernel computes the same.
    x = torch.arange(-6, 6, dtype=torch.int32).reshape(3, 4).t()
    torch._dynamo.reset()
    out = torch.compile(lambda v: v * 3 + 1, backend="fuser")(x)
    assert torch.equal(out, x * 3 + 1)
    options = interpreter.interpreter_builder.options
    assert not options.debug and not options.sanitize_overflow


def test_short_rows_go_many_to_an_interpreted_program_and_long_rows_still_loop():
    # The interpreter's cost is per program: a row kernel's program holds CPU_ROW_ELEMENTS elements (the
    # conformance full tier's amax over 3 copies of 1823x781 values: 87 programs, not 348), while a row
    # longer than CPU_MAX_BLOCK is still looped (what the suite's long rows check on the CPU).
    report = fuser.explain(lambda t: t.amax(-1), torch.randn(5, 3), fuser_options={"unvalidated": "fuse"})
    (kernel,) = report.kernels
    short = launch_config.choose_config([kernel], {"num_rows": 1823 * 781, "num_cols": 3}, interpreted=True)
    assert (
        short.blocks["XBLOCK"] * short.blocks["RBLOCK"]
        == launch_config.CPU_ROW_ELEMENTS
        > launch_config.CPU_MAX_BLOCK
    )
    assert short.grid == (87,)
    long = launch_config.choose_config(
        [kernel], {"num_rows": 3, "num_cols": launch_config.CPU_MAX_BLOCK + 1}, interpreted=True
    )
    assert long.variant == 1 and long.blocks["RBLOCK"] < launch_config.CPU_MAX_BLOCK  # the looped variant
