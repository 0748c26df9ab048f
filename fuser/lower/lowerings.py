"""Every op the fuser lowers, by name, with the dtypes it lowers and a fingerprint of its lowering.

The manifest (`fuser.validate.validation`) names ops as `namespace.name.overload` ("aten.add.Tensor",
"prims.div.default"), the conformance suite's spelling. A fingerprint hashes what the op's kernels are
on an architecture: the kernels the fuser emits for the op's probe programs (`fuser.validate.probes`: every
dtype it lowers, alone, producing, consuming, reduced, reading a reduction, over broadcast and
transposed operands, its attribute variants), normalized so comments and formatting do not count, with
the source of every `lib.*` helper they call and, on the interpreter (`cpu`), the stand-ins they run
with (NumPy `libdevice` functions, the reductions and bfloat16 conversions). So editing a lowering
stales that op's manifest entries, and a change to shared code generation stales every entry whose
kernels it changes. Fingerprints are computed once per version of the fuser's source and cached on disk.

The gate (`fuser.validate.validation`) reads them from `fuser/manifest/fingerprints.json` instead, where that
table was written for this very source (`python -m fuser.validate.write_fingerprints` writes it; CI fails while it is out
of date): computing them cost a fresh machine's first compile 5 s on the CPU and about 10 s on the GPU
host for GPT-2's 42 ops (session 15). The table holds no torch or Python version: a fingerprint hashes
kernels generated from graphs built without tracing, and the sm_90 entries validated under torch 2.11
and Python 3.12 match those computed under torch 2.13 and Python 3.11 (`manifest_check`).
"""

from __future__ import annotations

import hashlib
import inspect
import json
import os
import re
import sys
import tempfile
import textwrap
from dataclasses import dataclass, fields
from functools import cache
from pathlib import Path

import torch

from fuser import kernel_lib
from fuser.interpreter import bf16 as interpreter_bf16
from fuser.interpreter import libdevice as interpreter_libdevice
from fuser.interpreter import reduce as interpreter_reduce
from fuser.lower.dtypes import SUPPORTED_DTYPES
from fuser.lower.ops import (
    INDEXED_BY_OVERLOAD,
    POINTWISE_BY_OVERLOAD,
    SCATTER_BY_OVERLOAD,
    VIEW_BY_OVERLOAD,
    PointwiseOp,
)
from fuser.lower.reductions import REDUCTION_BY_OVERLOAD
from fuser.validate import probes

# The conformance suite's dtype names, in its order.
DTYPE_NAMES = {
    torch.float16: "float16",
    torch.bfloat16: "bfloat16",
    torch.float32: "float32",
    torch.float64: "float64",
    torch.int8: "int8",
    torch.int16: "int16",
    torch.int32: "int32",
    torch.int64: "int64",
    torch.uint8: "uint8",
    torch.bool: "bool",
}
assert set(DTYPE_NAMES) == set(SUPPORTED_DTYPES)
DTYPES_BY_NAME = {name: dtype for dtype, name in DTYPE_NAMES.items()}

PACKAGE = Path(__file__).resolve().parents[1]  # fuser/


def op_name(overload: torch._ops.OpOverload) -> str:
    """'aten.add.Tensor' for torch.ops.aten.add.Tensor; 'prims.div.default' for prims::div."""
    return str(overload).replace("::", ".")


@dataclass(frozen=True)
class Lowering:
    name: str
    kind: str  # pointwise | reduction | view | scatter | indexed
    dtypes: tuple[str, ...]  # the operand dtypes it is lowered for (others run eager)


def _accepted(op: PointwiseOp) -> tuple[str, ...]:
    return tuple(name for dtype, name in DTYPE_NAMES.items() if op.accepts.admits(dtype))


@cache
def lowerings() -> dict[str, Lowering]:
    """Every lowered op by name."""
    found = {}
    for overload, op in POINTWISE_BY_OVERLOAD.items():
        found[op_name(overload)] = Lowering(op_name(overload), "pointwise", _accepted(op))
    every = tuple(DTYPE_NAMES.values())
    for overload in REDUCTION_BY_OVERLOAD:
        found[op_name(overload)] = Lowering(op_name(overload), "reduction", every)
    for overload in VIEW_BY_OVERLOAD:
        found[op_name(overload)] = Lowering(op_name(overload), "view", every)
    for overload in SCATTER_BY_OVERLOAD:
        found[op_name(overload)] = Lowering(op_name(overload), "scatter", every)
    for overload in INDEXED_BY_OVERLOAD:
        found[op_name(overload)] = Lowering(op_name(overload), "indexed", every)
    return found


def _overload(name: str) -> torch._ops.OpOverload:
    namespace, packet, overload = name.split(".")
    return getattr(getattr(getattr(torch.ops, namespace), packet), overload)


def _helpers(text: str, arch: str) -> list[str]:
    """The normalized source of each `lib.*` helper (and, on the interpreter, NumPy `libdevice.*`
    stand-in) that `text` calls, transitively."""
    modules = {"lib": kernel_lib, **({"libdevice": interpreter_libdevice} if arch == "cpu" else {})}
    sources: dict[str, str] = {}
    pending = [text]
    while pending:  # helpers call helpers: follow them
        for prefix, name in re.findall(r"\b(lib|libdevice)\.(\w+)", pending.pop()):
            key = f"{prefix}.{name}"
            if prefix not in modules or key in sources:
                continue
            helper = getattr(modules[prefix], name, None)
            target = getattr(helper, "fn", helper)  # a @triton.jit function wraps its Python source
            try:
                sources[key] = probes.normalized(textwrap.dedent(inspect.getsource(target)))
            except (TypeError, OSError):
                sources[key] = f"{key}: {helper!r}"
            if hasattr(helper, "stands_in_with"):  # the interpreter's wrappers share one source
                sources[key] += "\n" + _computed_with(helper.stands_in_with)
            pending.append(sources[key])
    return [f"{key}: {sources[key]}" for key in sorted(sources)]


def _computed_with(fn) -> str:
    """What an interpreter stand-in computes with: its source where it is the fuser's own, else the
    library function's name (`numpy.exp`, `math.erf`), which a library upgrade does not change."""
    if hasattr(fn, "wraps"):  # `fn` computed in float64 (fuser.interpreter.libdevice._in_float64)
        return f"{_computed_with(fn.wraps)} in float64"
    module = getattr(fn, "__module__", None) or type(fn).__module__
    if module == interpreter_libdevice.__name__:
        return probes.normalized(inspect.getsource(fn))
    return f"{module.split('.')[0]}.{fn.__name__}"


def _interpreter_shims(kernels: str) -> list[str]:
    """On the interpreter, the fuser's stand-ins for what Triton's interpreter does its own way: NumPy
    reductions for the fuser's combine functions, and bit-exact bfloat16 conversions."""
    used = [m for m, used in ((interpreter_reduce, "tl.reduce" in kernels), (interpreter_bf16, "bf16" in kernels))
            if used]  # fmt: skip
    return [probes.normalized(inspect.getsource(m)) for m in used]


def _table_entry(overload) -> str:
    """The op's table entry, functions left out (their effect is in the emitted kernels)."""
    for table in (
        POINTWISE_BY_OVERLOAD,
        REDUCTION_BY_OVERLOAD,
        VIEW_BY_OVERLOAD,
        SCATTER_BY_OVERLOAD,
        INDEXED_BY_OVERLOAD,
    ):
        if overload in table:
            entry = table[overload]
            return repr(
                sorted(
                    (f.name, _stable(getattr(entry, f.name)))
                    for f in fields(entry)
                    if not callable(getattr(entry, f.name))
                )
            )
    raise AssertionError(overload)


def _stable(value):
    """A set's repr follows string hashing, which differs per process (PYTHONHASHSEED): its elements are
    written sorted, in the repr's own form (so a set of one element reads as it always did)."""
    if not isinstance(value, (set, frozenset)):
        return value
    return _SortedSet(type(value).__name__, sorted(value))


@dataclass(frozen=True)
class _SortedSet:
    kind: str
    items: list

    def __repr__(self) -> str:
        return f"{self.kind}({{{', '.join(map(repr, self.items))}}})" if self.items else f"{self.kind}()"


def describe(name: str, arch: str) -> str:
    """What a fingerprint hashes: the op's table entry, the kernels its probes emit on `arch`
    (`fuser.validate.probes`), and the helpers and interpreter stand-ins those kernels call."""
    if name not in lowerings():
        raise ValueError(f"fuser: {name!r} is not a lowered op (see fuser/lower/ops.py)")
    overload = _overload(name)
    dtypes = tuple(DTYPES_BY_NAME[d] for d in lowerings()[name].dtypes)
    kernels = "\n".join(probes.emitted(name, overload, dtypes, "cpu" if arch == "cpu" else "cuda"))
    shims = _interpreter_shims(kernels) if arch == "cpu" else []
    gradients = _backward_decompositions(overload)
    return "\n".join([_table_entry(overload), kernels, *_helpers(kernels, arch), *shims, *gradients])


def _backward_decompositions(overload) -> list[str]:
    """The normalized source of the fuser's own decompositions of the op's backward ops (`logit_backward`,
    `sigmoid_backward`: fuser.capture.backend): the op's gradient kernels are built from them, and its probes
    emit only forward kernels. torch's stock decompositions are not included (a torch upgrade changes
    the source key, not an op's fingerprint). Empty for most ops, whose fingerprints this leaves as
    they were."""
    from fuser.capture.autograd_pairs import backward_ops
    from fuser.capture.backend import decomposition_table

    table = decomposition_table()
    found = []
    for backward in backward_ops().get(overload, ()):
        decomposition = table.get(backward)
        if getattr(decomposition, "__module__", None) == "fuser.capture.backend":
            source = probes.normalized(textwrap.dedent(inspect.getsource(decomposition)))
            found.append(f"{backward}: {source}")
    return found


@cache
def fuser_source_hash() -> str:
    """A hash of the fuser's own source files (subpackages too: an edit in fuser/interpreter/ counts)."""
    digest = hashlib.sha256()
    root = PACKAGE
    for path in sorted(root.rglob("*.py")):
        digest.update(path.relative_to(root).as_posix().encode() + path.read_bytes())
    return digest.hexdigest()[:16]


def source_key() -> str:
    """The fuser's source and the versions it generates code with: fingerprints computed under one key
    hold for every process with that key, so they are computed once and cached."""
    versions = f"{torch.__version__} {sys.version_info[:2]} {fuser_source_hash()}"
    return hashlib.sha256(versions.encode()).hexdigest()[:16]


@cache
def _cache_dir() -> Path:
    root = os.environ.get("FUSER_KERNEL_DIR") or Path(tempfile.gettempdir()) / f"fuser-kernels-{os.getuid()}"
    return Path(root) / "fingerprints" / source_key()


def compute_fingerprint(name: str, arch: str) -> str:
    """The fingerprint, computed now (about 0.1 s an op): generates the op's probe kernels."""
    return hashlib.sha256(describe(name, arch).encode()).hexdigest()[:16]


@cache
def fingerprint(name: str, arch: str) -> str:
    """A short hash of the kernels `name`'s lowering emits on `arch`: it changes when they do. Computed
    once per version of the fuser's source and kept on disk (beside the generated kernels), so a
    process checking a manifest entry reads a file instead of generating kernels."""
    path = _cache_dir() / arch / name
    try:
        return path.read_text()
    except OSError:
        pass
    value = compute_fingerprint(name, arch)
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile("w", dir=path.parent, delete=False) as temporary:
        temporary.write(value)
    os.replace(temporary.name, path)  # atomic: concurrent processes write the same value
    return value


SHIPPED = PACKAGE / "manifest" / "fingerprints.json"


@cache
def _shipped() -> dict[str, dict[str, str]]:
    """The committed table's fingerprints by arch and op, where it was written for this source; else {}."""
    try:
        table = json.loads(SHIPPED.read_text())
    except (OSError, ValueError):
        return {}
    return table["fingerprints"] if table.get("source") == fuser_source_hash() else {}


def gate_fingerprint(name: str, arch: str) -> str:
    """What the gate compares a manifest entry with: the committed table's fingerprint where the table
    was written for this very source, else the fingerprint computed (or cached on disk)."""
    shipped = _shipped().get(arch, {}).get(name)
    return shipped if shipped is not None else fingerprint(name, arch)


def shipped_table(fresh: bool = False) -> dict:
    """The table `python -m fuser.validate.write_fingerprints` writes: every lowered op's fingerprint on each arch
    with a manifest beside the table (`fresh`: computed now, not read from the disk cache, which a test
    that patched code generation could have filled)."""
    get = compute_fingerprint if fresh else fingerprint
    archs = sorted(path.stem for path in SHIPPED.parent.glob("*.toml"))
    return {
        "source": fuser_source_hash(),
        "fingerprints": {arch: {name: get(name, arch) for name in lowerings()} for arch in archs},
    }
