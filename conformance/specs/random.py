"""Specs of random ops: dropout, uniform and normal draws, Bernoulli trials, integer draws, permutations.

No backend can be held to eager's values (it draws from its own generator), so a random op's case
checks what can be checked, per sample (`check`), and the runner adds what holds for every one:
the result's shape and dtype are eager's, and the compiled program gives the same values again under
the same `torch.manual_seed` (eager's promise, which a backend must keep for a training run to be
reproducible). The statistical checks allow five standard deviations, and only run on samples of at
least `STATISTICS` elements (a false alarm about once in 3.5 million checks); a uniform draw's mean is
eager's own on that device and dtype, not the range's middle (eager draws half dtypes from a grid).
Dropout's are exact:
every element is 0 or x / (1 - p), the gradient uses the same mask as the forward, and the fraction
kept is 1 - p.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Any

import torch

from conformance.specs import OpSpec, shaped_spec
from conformance.specs.values import DTYPES, FLOATING

Calls = list[tuple[tuple, dict[str, Any]]]
STATISTICS = 1000  # elements a sample needs before its mean and spread are judged
SIGMAS = 5.0
P = 0.3  # dropout probability


def _random(op: str, args: Callable, check: Callable, *, dtypes=FLOATING, differentiable=False) -> OpSpec:
    return shaped_spec(op, "random", args, dtypes=dtypes, differentiable=differentiable, check=check)


# --- checks: (sample, compiled output, compiled input gradients or None, gradient outputs) -> problem --


def _within(name: str, value: float, expected: float, sigma: float) -> str:
    if abs(value - expected) <= SIGMAS * sigma:
        return ""
    return f"{name} {value:.4g}, expected {expected:.4g} within {SIGMAS:g} sigma ({SIGMAS * sigma:.3g})"


def _kept_fraction(kept: torch.Tensor, counted: torch.Tensor) -> str:
    n = int(counted.sum())
    if n < STATISTICS:
        return ""
    fraction = float(kept[counted].double().mean())
    return _within("fraction kept", fraction, 1 - P, math.sqrt(P * (1 - P) / n))


def _scaled(x: torch.Tensor, kept: torch.Tensor) -> torch.Tensor:
    """What dropout gives, as eager computes it: x * mask * (1 / (1 - p)) in x's dtype (a dropped nan
    stays nan: nan * 0)."""
    return x * kept * (1.0 / (1 - P))


def _same(name: str, actual: torch.Tensor, expected: torch.Tensor) -> str:
    close = torch.isclose(
        actual.double(),
        expected.double(),
        rtol=1e-2 if actual.dtype in (torch.float16, torch.bfloat16) else 1e-6,
        atol=1e-6,
        equal_nan=True,
    )
    if bool(close.all()):
        return ""
    at = int((~close).reshape(-1).nonzero()[0])
    return f"{name}: {int((~close).sum())} elements differ; at flat {at}: {actual.reshape(-1)[at].item()!r}, expected {expected.reshape(-1)[at].item()!r}"


def native_dropout_check(sample, output, grads, grad_outputs) -> str:
    x = sample.args[0]
    out, mask = output
    if mask.dtype != torch.bool:
        return f"the mask's dtype is {mask.dtype}, not bool"
    if grads is not None:
        # Read where x is not nan: there the gradient is the context's (from_reduction's amax sends nan back
        # to a nan input, in eager too: a nan ties with none of its copies, grad / 0 * 0).
        read = ~x.isnan()
        return _same(
            "gradient (not the forward's mask, or not scaled)",
            grads[0][read],
            _scaled(grad_outputs[0], mask)[read],
        )
    return _same(
        "output (not x / (1 - p) where kept and 0 elsewhere)", out, _scaled(x, mask)
    ) or _kept_fraction(mask, torch.ones_like(mask))


def dropout_check(sample, output, grads, grad_outputs) -> str:
    """Without a mask output: an element is kept where the result is not 0, read only where x is finite
    and not 0 (a dropped inf gives nan, a kept 0 gives 0)."""
    x = sample.args[0]
    informative = (x != 0) & x.isfinite()
    kept = output != 0
    if grads is not None:
        expected = _scaled(grad_outputs[0], kept)
        return _same("gradient (not the forward's mask)", grads[0][informative], expected[informative])
    problem = _same(
        "output (not x / (1 - p) where kept and 0 elsewhere)",
        output[informative],
        _scaled(x, kept)[informative],
    )
    return problem or _kept_fraction(kept, informative)


def uniform_check(low: float, high: float) -> Callable:
    def check(sample, output, grads, grad_outputs) -> str:
        values = output.double()
        if values.numel() and not bool(((values >= low) & (values <= high)).all()):
            return f"values outside [{low}, {high}]: min {values.min().item()}, max {values.max().item()}"
        if values.numel() < STATISTICS:
            return ""
        expected, reference_error = eager_uniform_mean(low, high, output.dtype, output.device)
        sigma = math.hypot((high - low) / math.sqrt(12 * values.numel()), reference_error)
        return _within("mean", values.mean().item(), expected, sigma)

    return check


REFERENCE_DRAWS = 1 << 24  # eager's own draws that a uniform mean is judged against


@functools.cache
def eager_uniform_mean(
    low: float, high: float, dtype: torch.dtype, device: torch.device
) -> tuple[float, float]:
    """The mean of eager's uniform draws in `dtype` on `device`, and its standard error. Not (low + high) / 2
    for a half dtype: eager's CPU draws bfloat16 from the grid k / 2^8 (so rand's mean is 0.498, 6.6 sigma
    from 0.5 at the full tier's 1.4 million elements), and rounding a draw to the dtype moves it again.
    Drawn from a generator of its own, so the program's draws under `torch.manual_seed` are not disturbed."""
    generator = torch.Generator(device=device).manual_seed(0)
    draws = torch.empty(REFERENCE_DRAWS, dtype=dtype, device=device).uniform_(low, high, generator=generator)
    draws = draws.double()
    return draws.mean().item(), draws.std().item() / math.sqrt(REFERENCE_DRAWS)


def normal_check(sample, output, grads, grad_outputs) -> str:
    values = output.double()
    if not bool(values.isfinite().all()):
        return "a normal draw is not finite"
    n = values.numel()
    if n < STATISTICS:
        return ""
    return _within("mean", values.mean().item(), 0.0, 1 / math.sqrt(n)) or _within(
        "standard deviation", values.std().item(), 1.0, math.sqrt(1 / (2 * n))
    )


def bernoulli_check(sample, output, grads, grad_outputs) -> str:
    values = output.double()
    if values.numel() and not bool(((values == 0) | (values == 1)).all()):
        return "a Bernoulli draw is neither 0 nor 1"
    probability = sample.args[1] if len(sample.args) > 1 else sample.args[0].double()
    p = torch.as_tensor(probability, dtype=torch.float64).expand(values.shape)
    if values.numel() < STATISTICS:
        return ""
    return _within(
        "count of ones", values.sum().item(), p.sum().item(), math.sqrt((p * (1 - p)).sum().item())
    )


def randint_check(low: int, high: int) -> Callable:
    def check(sample, output, grads, grad_outputs) -> str:
        if output.numel() and not bool(((output >= low) & (output < high)).all()):
            return f"values outside [{low}, {high})"
        return uniform_check(low, high - 1)(sample, output.double(), grads, grad_outputs)

    return check


def randperm_check(sample, output, grads, grad_outputs) -> str:
    n = sample.args[0]
    if not torch.equal(output.sort().values.cpu(), torch.arange(n)):
        return "not a permutation of 0..n-1"
    return ""


# --- calls -------------------------------------------------------------------------------------------


def like_calls(x, make) -> Calls:
    return [((x,), {})]


def dropout_calls(x, make) -> Calls:
    return [((x, P, True), {})]


def uniform_calls(x, make) -> Calls:
    return [((x, -2.0, 3.0), {})]


def probability_calls(x, make) -> Calls:
    return [((make(x.shape, position=1, specials=False, domain=(0.0, 1.0)),), {})]


def bernoulli_p_calls(x, make) -> Calls:
    return [((x, 0.3), {})]


def randint_calls(x, make) -> Calls:
    return [((x, -3, 5), {"dtype": torch.int64})]


def sized_calls(x, make) -> Calls:
    return [((list(x.shape),), {"dtype": x.dtype, "device": x.device})]


def randperm_calls(x, make) -> Calls:
    return [((x.numel(),), {"device": x.device})]


def random_specs() -> list[OpSpec]:
    return [
        _random("native_dropout.default", dropout_calls, native_dropout_check, differentiable=True),
        _random("dropout.default", dropout_calls, dropout_check, differentiable=True),
        _random("rand_like.default", like_calls, uniform_check(0.0, 1.0)),
        _random("randn_like.default", like_calls, normal_check),
        _random("rand.default", sized_calls, uniform_check(0.0, 1.0)),
        _random("randn.default", sized_calls, normal_check),
        _random("uniform.default", uniform_calls, uniform_check(-2.0, 3.0)),
        _random("bernoulli.default", probability_calls, bernoulli_check),
        _random("bernoulli.p", bernoulli_p_calls, bernoulli_check),
        _random("randint_like.low_dtype", randint_calls, randint_check(-3, 5), dtypes=tuple(DTYPES)),
        _random("randperm.default", randperm_calls, randperm_check, dtypes=("int64",)),
    ]
