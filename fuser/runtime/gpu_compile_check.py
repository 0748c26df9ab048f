"""Compile the fuser's kernels for a CUDA GPU on a machine that has none.

On a CPU the fuser runs its kernels in Triton's interpreter, which accepts programs Triton's compiler
rejects (a type mismatch inside a reduction, say), so a kernel can pass every CPU test and fail to build
on the GPU. With FUSER_CHECK_CUDA_COMPILE=<compute capability> (90 for Hopper, 80 for Ampere), each
interpreted launch is also compiled, through Triton's compiler and ptxas (both ship with Triton; no GPU
or driver needed), for that architecture, with the block sizes, warps and argument specialization the
GPU would get for the same arguments. A kernel that does not compile fails its launch as it would on
the GPU. Each kernel compiles once per specialization; Triton's disk cache keeps the results.

The specialization goes through Triton's own argument binder (`create_function_from_signature`,
`JITFunction._pack_args`: not public API, present in Triton 3.6 to 3.9), so it is the one `run` uses.
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Callable
from typing import Any

import triton

from fuser import metrics

CHECK_ENV = "FUSER_CHECK_CUDA_COMPILE"

_compiled: dict[tuple, Any] = {}  # each specialization's compiled kernel


def target_capability() -> int | None:
    """The compute capability asked for by FUSER_CHECK_CUDA_COMPILE (e.g. '90' or 'sm_90'), or None."""
    value = os.environ.get(CHECK_ENV, "").strip()
    if not value:
        return None
    match = re.fullmatch(r"(?:sm_?)?(\d{2,3})", value)
    if not match:
        raise ValueError(
            f"fuser: {CHECK_ENV}={value!r} is not a CUDA compute capability; give one like 90 (Hopper) or 80"
        )
    return int(match[1])


@functools.cache
def _binder(jit_fn: Any, capability: int) -> tuple[Any, Any, Callable]:
    """Target, backend and Triton's argument binder for `jit_fn` on CUDA `capability` (built once: the
    binder is generated code)."""
    from triton.backends.compiler import GPUTarget
    from triton.compiler import make_backend

    try:
        from triton.runtime.jit import create_function_from_signature
    except ImportError as error:  # pragma: no cover - depends on the installed Triton
        raise RuntimeError(
            f"fuser: {CHECK_ENV} needs Triton's argument binder, not found in triton {triton.__version__}"
        ) from error
    target = GPUTarget("cuda", capability, 32)
    backend = make_backend(target)
    return target, backend, create_function_from_signature(jit_fn.signature, jit_fn.params, backend)


def _run_keywords(jit_fn: Any) -> dict[str, Any]:
    """The compile options `JITFunction.run` adds from Triton's knobs before binding (3.6: debug and
    instrumentation_mode; 3.9 also fpsan_homomorphic_casts): with them, a compile here has the key a
    launch's own compile would have, so a launch finds it in Triton's disk cache
    (`fuser.runtime.compile_pool`)."""
    from triton import knobs

    keywords = {"debug": bool(jit_fn.debug) or knobs.runtime.debug}
    for name in ("instrumentation_mode", "fpsan_homomorphic_casts"):
        if hasattr(knobs.compilation, name):
            keywords[name] = getattr(knobs.compilation, name)
    return keywords


def compile_for_cuda(jit_fn: Any, args: list, options: dict[str, Any], capability: int) -> Any:
    """Compile `jit_fn` for CUDA `capability` as a launch with these arguments and options would, and
    return Triton's compiled kernel (its `asm` holds the PTX). Raises RuntimeError naming the kernel and
    the architecture when Triton or ptxas rejects it."""
    from triton.compiler import ASTSource

    target, backend, binder = _binder(jit_fn, capability)
    bound, specialization, run_options = binder(*args, **options, **_run_keywords(jit_fn))
    key = (jit_fn.cache_key, capability, str(specialization), tuple(sorted(run_options.items())))
    if key in _compiled:
        return _compiled[key]
    packed_options, signature, constexprs, attrs = jit_fn._pack_args(
        backend, dict(options), bound, specialization, run_options
    )
    try:
        compiled = triton.compile(
            ASTSource(jit_fn, signature, constexprs, attrs), target=target, options=packed_options.__dict__
        )
    except Exception as error:
        message = str(error).strip().splitlines()
        raise RuntimeError(
            f"fuser: kernel {jit_fn.__name__} does not compile for CUDA sm_{capability} "
            f"(triton {triton.__version__}): {type(error).__name__}: {' / '.join(message[-6:])}"
        ) from error
    _compiled[key] = compiled
    metrics.bump("cuda_compile_checks")
    return compiled
