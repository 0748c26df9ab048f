"""Patches to Triton's interpreter itself, each made once per process by `fuser.interpreter.shim`."""

from __future__ import annotations

import inspect
from dataclasses import replace


def drop_dead_overflow_checks() -> None:
    """Triton's interpreter wraps every int32 add, sub and mul (index arithmetic, mostly) in an int64
    overflow check (`sanitize_overflow`, on by default) and then drops its result: the check's
    device_assert does nothing unless the options' `debug` is on, and the interpreter never turns it on.
    Computing that dead check was half the interpreter's time on the conformance full tier's largest
    samples (docs/validation.md, "Where validation's time goes"). With `debug` on it stays."""
    from triton.runtime import interpreter

    options = interpreter.interpreter_builder.options
    if not options.debug:
        interpreter.interpreter_builder.options = replace(options, sanitize_overflow=False)


def index_by_squeezing() -> None:
    """Triton 3.6's interpreter holds a kernel's int argument as a one-element array and turns it into a
    loop bound (`range(0, num_cols, RBLOCK)`) with `int(array)`, which NumPy 2.4 refuses for an array of
    one dimension: every looped and split row kernel raised under Triton 3.6 (found validating the cpu
    manifest on the lent machine's cores, 2026-11-27). Triton 3.9 squeezes the array first; do as it does."""
    from triton.runtime import interpreter

    original = interpreter._patch_lang_tensor
    if getattr(original, "fuser_squeezes_index", False) or "squeeze()" in inspect.getsource(original):
        return  # patched already, or a Triton that squeezes (3.9): nothing to add to every launch

    def patch_lang_tensor(tensor, scope):
        original(tensor, scope)
        scope.set_attr(tensor, "__index__", lambda self: int(self.handle.data.squeeze()))

    patch_lang_tensor.fuser_squeezes_index = True
    interpreter._patch_lang_tensor = patch_lang_tensor
