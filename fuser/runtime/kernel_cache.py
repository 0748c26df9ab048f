"""Generated kernels on disk and in memory: each written once to a folder shared by every process (Triton
reads a kernel's source from its file), and loaded once per process and mode.

A CUDA tensor's kernel is compiled by Triton; a CPU tensor's is the same source run by Triton's
interpreter (`fuser.interpreter`). Loaded kernels are cached by their source without the header comment,
so graphs with the same structure, dtypes and layout classes share one compile whatever their sizes.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import tempfile
import types
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from fuser import metrics
from fuser.interpreter.shim import interpreted_kernel

if TYPE_CHECKING:
    from fuser.emit.codegen import KernelSource


@functools.cache
def kernel_dir() -> Path:
    """Where generated kernels are written: FUSER_KERNEL_DIR if set, else one folder per user shared by
    every process and run (a kernel's file is named by the hash of its body, so equal kernels share a
    file; a folder per process left thousands of files behind, issue 14)."""
    chosen = Path(
        os.environ.get("FUSER_KERNEL_DIR") or Path(tempfile.gettempdir()) / f"fuser-kernels-{os.getuid()}"
    )
    chosen.mkdir(parents=True, exist_ok=True)
    return chosen


def _load_module(path: Path) -> types.ModuleType:
    spec = importlib.util.spec_from_file_location(f"fuser_generated.{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_kernels: dict[tuple[str, bool], Callable] = {}


def load_kernel(source: KernelSource, interpreted: bool, counted: bool = True) -> Callable:
    """The launchable kernel for `source`: loaded once per cache key and mode (each load is counted,
    except the GPU builds FUSER_CHECK_CUDA_COMPILE only compiles, which never run)."""
    key = (source.cache_key, interpreted)
    if key not in _kernels:
        _kernels[key] = _load_kernel(source, interpreted)
        if counted:
            metrics.bump("kernels_compiled")
    return _kernels[key]


def kernel_file(source: KernelSource) -> Path:
    """The kernel's file, written if no process or run has written it yet."""
    path = kernel_dir() / f"{source.name}_{source.cache_key[:32]}.py"
    if not path.exists():  # written by another process or run: the same body (its header may differ)
        partial = path.with_suffix(f".{os.getpid()}.tmp")
        partial.write_text(source.source)
        partial.replace(path)  # atomic: a concurrent reader sees the whole file or none
    return path


def load_file(path: Path, name: str):
    """The Triton kernel `name` defined in the kernel file `path` (a compile worker's way in)."""
    return getattr(_load_module(path), name)


def is_loaded(source: KernelSource, interpreted: bool) -> bool:
    return (source.cache_key, interpreted) in _kernels


def _load_kernel(source: KernelSource, interpreted: bool) -> Callable:
    module = _load_module(kernel_file(source))
    jit_fn = getattr(module, source.name)
    return interpreted_kernel(module, jit_fn) if interpreted else jit_fn


def clear_kernel_cache() -> None:
    """Forget every loaded kernel, so the next launch of each compiles again (cold-compile timing, tests)."""
    _kernels.clear()
