"""The backends a workload runs on: each is a name and a top-level function that compiles a program.

The gate treats the fuser as one backend among others and reads it only through its public hooks:
`fuser.compile`, and `fuser.counters()` for the launches it makes. A variant of a backend (the fuser
with fusion off, or with a planted slowdown in a test) is another `Backend` under the same name, so it
is compared with that name's baseline. The compile function must be a top-level function: the CPU
tier's instruction counts run in a separate process under callgrind, which loads it from its file.
"""

from __future__ import annotations

import importlib.util
import inspect
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

import fuser


def compile_with_fuser(program: Callable) -> Callable:
    # The configuration users get: an op its architecture's manifest does not validate runs eagerly, so a
    # change that stales an entry shows as more kernels (docs/validation.md).
    return fuser.compile(program, dynamic=False)


def compile_with_inductor(program: Callable) -> Callable:
    return torch.compile(program, dynamic=False)


def run_eagerly(program: Callable) -> Callable:
    return program


@dataclass(frozen=True)
class Backend:
    name: str
    compile: Callable[[Callable], Callable]
    # True where fuser.counters() sees every launch (its own kernels plus the aten calls it left eager).
    counted_by_fuser: bool = False
    # False where the backend's CPU code has instructions valgrind cannot run: Inductor compiles C++
    # kernels for the host's CPU (AVX-512 here), which kill a process under callgrind.
    runs_under_valgrind: bool = True
    # "module:function" of the backend's hook around its own compile step, a context manager factory
    # taking (enter, leave) callbacks; the CPU tier counts the instructions inside it. Empty: not offered.
    compile_step: str = ""

    def to_json(self) -> dict[str, Any]:
        """How another process finds this backend: the compile function's file and name."""
        function = self.compile
        if "<" in function.__qualname__ or not inspect.isfunction(function):
            raise ValueError(
                f"backend {self.name}: its compile function must be a top-level function "
                f"(callgrind loads it in another process), not {function!r}"
            )
        return {
            "name": self.name,
            "file": inspect.getsourcefile(function),
            "function": function.__qualname__,
            "counted_by_fuser": self.counted_by_fuser,
            "compile_step": self.compile_step,
        }

    @classmethod
    def from_json(cls, spec: dict[str, Any]) -> Backend:
        path = Path(spec["file"])
        module_name = f"perfgate_backend_{path.stem}"
        if module_name not in sys.modules:
            module_spec = importlib.util.spec_from_file_location(module_name, path)
            module = importlib.util.module_from_spec(module_spec)
            sys.modules[module_name] = module
            module_spec.loader.exec_module(module)
        function = getattr(sys.modules[module_name], spec["function"])
        return cls(
            spec["name"], function, spec["counted_by_fuser"], compile_step=spec.get("compile_step", "")
        )

    def compile_observer(self) -> Callable | None:
        """The backend's compile-step hook, or None where it offers none (or this tree's backend predates it:
        a base tree from before the hook measures no compile step)."""
        if not self.compile_step:
            return None
        module_name, _, attribute = self.compile_step.partition(":")
        try:
            return getattr(importlib.import_module(module_name), attribute)
        except (ImportError, AttributeError):
            return None


BACKENDS: dict[str, Backend] = {
    b.name: b
    for b in (
        Backend("fuser", compile_with_fuser, counted_by_fuser=True, compile_step="fuser:observing_compile"),
        Backend("inductor", compile_with_inductor, runs_under_valgrind=False),
        Backend("eager", run_eagerly),
    )
}
