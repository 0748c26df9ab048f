"""Every libdevice function a kernel can call exists on the GPU and under the interpreter."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import triton.language.extra.libdevice as triton_libdevice

import fuser.interpreter.libdevice as interpreter_libdevice
import fuser.kernel_lib
import fuser.lower.ops

CALL = re.compile(r"libdevice\.(\w+)\(")


def _called_in(module) -> set[str]:
    return set(CALL.findall(Path(inspect.getfile(module)).read_text()))


def test_every_libdevice_function_the_kernels_call_exists_in_triton_and_in_the_interpreter_shim():
    called = _called_in(fuser.lower.ops) | _called_in(fuser.kernel_lib)
    assert called, "the pattern found no libdevice calls: the test would check nothing"
    missing_on_gpu = sorted(n for n in called if not hasattr(triton_libdevice, n))
    missing_in_shim = sorted(n for n in called if not hasattr(interpreter_libdevice, n))
    assert missing_on_gpu == [], f"not in triton.language.extra.libdevice: {missing_on_gpu}"
    assert missing_in_shim == [], f"not in fuser.interpreter.libdevice: {missing_in_shim}"


def test_the_interpreter_shim_offers_only_functions_triton_has():
    offered = {n for n, v in vars(interpreter_libdevice).items() if callable(v) and not n.startswith("_")}
    offered -= {"Callable", "TensorHandle"}
    assert sorted(n for n in offered if not hasattr(triton_libdevice, n)) == []
