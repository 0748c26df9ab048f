"""The model-block tier: each block of `conformance/blocks.py` in each precision mode, compiled with the
run's backend against eager (loss and every parameter's gradient, float64 as the reference).

`pytest conformance/test_models.py --backend inductor` (or `--tier models` with test_ops.py, which then
runs only these); CI runs them on CPU with the quick tier.
"""

from __future__ import annotations

import pytest

from conformance.blocks import BLOCKS, MODES, check_block


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("block", list(BLOCKS))
def test_block_matches_eager(block: str, mode: str, request: pytest.FixtureRequest) -> None:
    backend, device = request.config.getoption("backend"), request.config.getoption("device")
    problems = check_block(BLOCKS[block], mode, backend, device)
    if problems:
        *differ, bisect = problems
        raise AssertionError(
            f"{block} ({mode}) on {backend}: {len(differ)} values differ from eager; first: "
            f"{differ[0][:300]}\n{bisect}"
        )
