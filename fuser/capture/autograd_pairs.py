"""Forward ops whose backward is an op of its own fed with the forward's saved outputs.

AOTAutograd applies a decomposition *below* autograd: the forward op's autograd formula still runs and
saves the forward's outputs, but those outputs now come from the decomposition. Where the formula hands
them to a backward op that stays an op (its ATen kernel), that kernel trusts them to be what the
forward's kernel would have returned. A decomposition written for another purpose breaks the trust:
`_scaled_dot_product_flash_attention_for_cpu`'s decomposition (meant for export) returns a second
output that is not the logsumexp its backward op reads, and every gradient upstream of attention came
out wrong. So a pair is decomposed together or not at all (`fuser.capture.backend.decomposition_table`).

The pairs are read from the autograd formulas torch ships (`torchgen/packaged/autograd/derivatives.yaml`),
so a pair a torch upgrade adds is found without anyone listing it.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from pathlib import Path

import torch
import torchgen
import yaml

aten = torch.ops.aten
DERIVATIVES = Path(torchgen.__file__).parent / "packaged" / "autograd" / "derivatives.yaml"
_FORMULA_KEYS_THAT_ARE_NOT_FORMULAS = {"name", "dispatch", "output_differentiability"}


@dataclass(frozen=True)
class SavedOutputPair:
    """`forward`'s autograd formula passes some of its outputs (`reads`) to the aten op `backward`."""

    forward: torch._ops.OpOverload
    backward: torch._ops.OpOverload
    reads: tuple[str, ...]


def _overload(schema_name: str) -> torch._ops.OpOverload | None:
    base, _, overload = schema_name.partition(".")
    packet = getattr(aten, base, None)
    return None if packet is None else getattr(packet, overload or "default", None)


def _output_names(op: torch._ops.OpOverload) -> set[str]:
    # A formula names outputs by their schema names, or as result / result0, result1, ...
    names = {"result"} | {f"result{i}" for i in range(len(op._schema.returns))}
    return names | {r.name for r in op._schema.returns if r.name}


def _called_ops(formula: str) -> list[torch._ops.OpOverload]:
    # The backward ops a formula calls: `name(` where name is an aten op (the _symint suffix is C++'s).
    found = []
    for name in re.findall(r"\b([A-Za-z_]\w*)\s*\(", formula):
        overload = _overload(name.removesuffix("_symint"))
        if overload is not None and "backward" in name:
            found.append(overload)
    return found


def _backward_formulas():
    """(forward op, its output names, one backward formula) for every formula in torch's derivatives.yaml.
    Backward formulas are keyed by the inputs they differentiate; keys naming outputs are forward-mode
    (jvp) formulas, which training does not run."""
    for entry in yaml.safe_load(DERIVATIVES.read_text()):
        forward = _overload(entry["name"].split("(")[0])
        if forward is None:
            continue
        outputs = _output_names(forward)
        for key, formula in entry.items():
            if key in _FORMULA_KEYS_THAT_ARE_NOT_FORMULAS or key in outputs or not isinstance(formula, str):
                continue
            yield forward, outputs, formula


@functools.cache
def saved_output_pairs() -> tuple[SavedOutputPair, ...]:
    """Every (forward, backward op) pair of torch's autograd formulas where the backward op is called
    with outputs of the forward."""
    pairs = []
    for forward, outputs, formula in _backward_formulas():
        reads = tuple(sorted(outputs & set(re.findall(r"\b\w+\b", formula))))
        if reads:
            pairs += [SavedOutputPair(forward, backward, reads) for backward in _called_ops(formula)]
    return tuple(dict.fromkeys(pairs))


@functools.cache
def backward_ops() -> dict[torch._ops.OpOverload, tuple[torch._ops.OpOverload, ...]]:
    """For each forward op, the aten backward ops its autograd formulas call (`logit` -> `logit_backward`):
    an op's gradient kernels are built from their decompositions."""
    found: dict[torch._ops.OpOverload, list[torch._ops.OpOverload]] = {}
    for forward, _, formula in _backward_formulas():
        found.setdefault(forward, []).extend(_called_ops(formula))
    return {forward: tuple(dict.fromkeys(ops)) for forward, ops in found.items()}


def split_pairs(table: dict) -> list[SavedOutputPair]:
    """The pairs `table` decomposes by halves: the forward decomposed while its backward op stays an op."""
    return [p for p in saved_output_pairs() if p.forward in table and p.backward not in table]
