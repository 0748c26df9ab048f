"""The fuser's options: given to `fuser.compile(fn, **options)` or `torch.compile(..., options={...})`."""

from __future__ import annotations

import logging
import os
import sys
from dataclasses import dataclass, fields
from typing import Any

log = logging.getLogger("fuser")


def _env_flag(name: str) -> bool:
    return os.environ.get(name, "0").lower() not in ("", "0", "false", "no")


UNVALIDATED_CHOICES = ("eager", "fuse")
# Options that take one of a few strings; every other option takes a bool.
CHOICES = {"unvalidated": UNVALIDATED_CHOICES}


def _env_choice(name: str, choices: tuple[str, ...]) -> str:
    value = os.environ.get(name, "") or choices[0]
    if value not in choices:
        raise ValueError(f"fuser: {name}={value!r}; expected one of {', '.join(choices)}")
    return value


def _check(name: str, value: Any) -> None:
    if name in CHOICES:
        if value not in CHOICES[name]:
            raise TypeError(f"fuser: option {name} takes one of {', '.join(CHOICES[name])}, got {value!r}")
    elif not isinstance(value, bool):
        raise TypeError(f"fuser: option {name} takes a bool, got {value!r}")


@dataclass(frozen=True)
class Options:
    # Raise when a kernel fails to generate or launch, instead of running its nodes eagerly.
    # The environment variable FUSER_STRICT=1 makes it the default (the test suite runs strict).
    strict: bool = False
    # Show the fuser's log (eager fallbacks and their reasons) on stderr; also FUSER_LOG=1.
    log: bool = False
    # False gives every lowered op a kernel of its own: the unfused baseline that perf and quality
    # tests compare fusion against.
    fuse: bool = True
    # False keeps one launch per pointwise kernel: no horizontal fusion (`fuser.plan.horizontal`) of kernels
    # that run the same computation over different tensors. On by default (interpreter and CUDA:
    # docs/gpu-runs.md, 2026-11-26, H200 and H100); FUSER_HORIZONTAL=1 or 0 sets the default.
    horizontal: bool = True
    # What happens to an op the validation manifest does not enable on this architecture
    # (`fuser.validate.validation`): "eager" runs it eagerly, with the reason logged; "fuse" fuses it anyway, on
    # purpose, while developing or validating a lowering. FUSER_UNVALIDATED sets the default.
    unvalidated: str = "eager"
    # Replay CUDA graphs of compiled graphs (`fuser.runtime.cuda_graphs`). None (the default): of graphs that only
    # write into their inputs (a compiled optimizer step), on CUDA graphs that get horizontal fusion;
    # True: of any graph of static shape (new outputs from memory each capture owns); False: never.
    # FUSER_CUDA_GRAPHS=1 or 0 sets it.
    cuda_graphs: bool | None = None
    # True (the default since session 17): AOTAutograd's min-cut partitioner decides what the forward saves
    # for the backward, as the default backend's does: a value cheap to compute again from what is saved
    # anyway (a cross-entropy's fp32 log-probabilities, from the logits and two numbers a row) is recomputed
    # in the backward's kernel rather than written and read back (the cross-entropy backward's kernels
    # 0.945 -> 0.623 ms on an H200). False: every value the backward reads is saved. FUSER_RECOMPUTE=0 or 1
    # sets it.
    recompute: bool = True
    # True (the default): from its second call, a compiled graph's call is one function written out for the
    # sizes of its first (`fuser.runtime.call_function`); False: every call runs the general loop over its
    # steps (what the call path benchmark compares it with). FUSER_CALL_FUNCTION=0 or 1 sets it.
    call_function: bool = True

    def cuda_graph_mode(self, example_inputs: list[Any]) -> str | None:
        """Which graphs over these inputs are replayed as CUDA graphs (`fuser.runtime.cuda_graphs`): "any",
        "inputs" (those that only write their inputs, by default where the inputs are on a GPU and
        horizontal fusion is on: what the recorded GPU runs validated together), or None."""
        if self.cuda_graphs is not None:
            return "any" if self.cuda_graphs else None
        return "inputs" if on_cuda(example_inputs) and self.horizontal else None

    @classmethod
    def from_dict(cls, options: dict[str, Any] | None) -> Options:
        options = dict(options or {})
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(options) - known)
        if unknown:
            raise TypeError(
                f"fuser: unknown option(s) {', '.join(unknown)}; known options: {', '.join(sorted(known))}"
            )
        for name, value in options.items():
            _check(name, value)
        defaults = {
            "strict": _env_flag("FUSER_STRICT"),
            "log": _env_flag("FUSER_LOG"),
            "fuse": True,
            "horizontal": os.environ.get("FUSER_HORIZONTAL", "1") != "0",
            "cuda_graphs": {"1": True, "0": False}.get(os.environ.get("FUSER_CUDA_GRAPHS", "")),
            "unvalidated": _env_choice("FUSER_UNVALIDATED", UNVALIDATED_CHOICES),
            "recompute": os.environ.get("FUSER_RECOMPUTE", "1") != "0",
            "call_function": os.environ.get("FUSER_CALL_FUNCTION", "1") != "0",
        }
        chosen = cls(**(defaults | options))
        if chosen.log:
            show_log()
        return chosen


def show_log() -> None:
    """Send the fuser's INFO log (one line per eager fallback) to stderr, once."""
    if not any(getattr(h, "_fuser", False) for h in log.handlers):
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(name)s: %(message)s"))
        handler._fuser = True
        log.addHandler(handler)
    log.setLevel(logging.INFO)


def on_cuda(example_inputs: list[Any]) -> bool:
    return any(getattr(t, "is_cuda", False) for t in example_inputs)
