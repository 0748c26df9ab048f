"""What a created tensor (or a fill) meets in the program under test: a spec's `combine(result, x)`.

A created tensor alone is stored in its dtype and so rounded right even where a kernel held it wrongly
(a half fill of 0.1 kept as float32's 0.1); it goes wrong where the same kernel combines it with other
values. Each combination below meets the result with the sample's input `x`, so the created values
reach arithmetic (and cannot be folded into a constant), in ways models use them:

- `mixed`: `result - x` (cancels where x holds the same value: 0.1 - bf16(0.1) is 0 in eager and
  -9.8e-5 with an unrounded fill), `result * x` (whose gradient is the created value) and
  `result == x` (compared exactly: an unrounded fill is not equal to x's bf16(0.1); a difference
  would otherwise hide in a tensor that also holds x's huge values, since the oracle's float64 rule
  takes the largest error over the whole tensor);
- `outer`: `mixed` against x with a new last dim, for an (n, n) result such as eye(n);
- `masked`: an (n, n) result as tril and triu masks over x, as causal attention builds them;
- `filled`: the result filled first (empty_like followed by fill_);
- `gathered`: (2, k) indices such as tril_indices' reading x's last two dims.

Bools combine logically (bool - bool is an error in eager).
"""

from __future__ import annotations

import torch


def mixed(result: torch.Tensor, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
    if result.dtype == torch.bool and x.dtype == torch.bool:
        return result ^ x, result & x
    return result - x, result * x, result == x


def outer(result: torch.Tensor, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
    return mixed(result, x.unsqueeze(-1))


def masked(result: torch.Tensor, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    x = x.unsqueeze(-1)
    return x * result.tril(), x * result.triu(1)


def filled(result: torch.Tensor, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
    return mixed(result.fill_(0.1), x)


def gathered(result: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    return x[..., result[0], result[1]]
