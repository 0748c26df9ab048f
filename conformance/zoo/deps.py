"""The zoo's third-party model code: `transformers` and `timm`, imported on demand.

Both are optional (`pip install -e ".[zoo]"`); `missing()` says in one line what is absent. On a CPU
build of torch, PyPI's torchvision (which timm imports) cannot load its C++ ops: its wheel links
libtorch_cuda. Its Python side then fails at import, registering fake kernels for two ops that do not
exist. The zoo never calls torchvision's ops, so `_import_torchvision` declares those two schemas and
imports again; where the ops did load, nothing is declared.
"""

from __future__ import annotations

import importlib
import sys
from types import ModuleType

import torch

_TORCHVISION_OPS_IMPORT_NEEDS = ("nms", "qnms")
_declared: list[torch.library.Library] = []


def _import_torchvision() -> None:
    try:
        importlib.import_module("torchvision")
    except RuntimeError as error:
        if "torchvision::nms" not in str(error):
            raise
        for name in [m for m in sys.modules if m == "torchvision" or m.startswith("torchvision.")]:
            del sys.modules[name]
        library = torch.library.Library("torchvision", "FRAGMENT")
        for op in _TORCHVISION_OPS_IMPORT_NEEDS:
            library.define(f"{op}(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
        _declared.append(library)  # a Library unregisters its definitions when collected
        importlib.import_module("torchvision")


def missing() -> str | None:
    """None when transformers and timm import, else one line naming what is missing."""
    absent = []
    for name in ("transformers", "timm", "torchvision"):
        if importlib.util.find_spec(name) is None:
            absent.append(name)
    if absent:
        return f"the zoo needs {', '.join(absent)}: pip install -e '.[zoo]' (see README)"
    return None


def transformers() -> ModuleType:
    _import_torchvision()
    module = importlib.import_module("transformers")
    module.logging.set_verbosity_error()  # tiny configs trip warnings meant for real checkpoints
    return module


def timm() -> ModuleType:
    _import_torchvision()
    return importlib.import_module("timm")
