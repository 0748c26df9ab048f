"""The validation manifest and the gate the fuser obeys: an op is fused on an architecture only for the
dtypes its manifest entry there validates, and only while the entry is fresh.

One TOML file per architecture, `fuser/manifest/<arch>.toml` (`cpu` for Triton's interpreter,
`sm_90`, `sm_80`, ... for CUDA devices by compute capability), written by
`python -m conformance.validate` and reviewed as a pull-request diff:

    [[op]]
    op = "aten.add.Tensor"
    arch = "cpu"
    dtypes = ["float32", "int64"]
    torch = "2.13.0"
    triton = "3.9.0"
    date = "2026-11-25"
    cases = 70
    commit = "483cb1e"
    fingerprint = "0123456789abcdef"   # fuser.lower.lowerings.fingerprint(op, arch)

An entry whose fingerprint no longer matches the lowering is *stale*: it counts as unvalidated until
the op is validated again. A malformed file is an error naming the file and line. The conformance
side (conformance/validate/manifest_check.py) adds the checks that need the suite: the JSON schema, case
counts. docs/validation.md says why and how.

Anything not validated runs eagerly, with the reason in the fuser's log and `fuser.explain`, unless
the engineer opts in: `options={"unvalidated": "fuse"}` or `FUSER_UNVALIDATED=fuse`.
"""

from __future__ import annotations

import logging
import os
import re
import tomllib
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import torch
from torch import fx

from fuser.lower.lowerings import DTYPE_NAMES, PACKAGE, gate_fingerprint, lowerings, op_name
from fuser.lower.nodes import meta, tensor_meta

log = logging.getLogger("fuser")

# FUSER_MANIFEST_DIR points the gate at other manifests (a scratch validation, a test's empty folder).
MANIFEST_DIR = Path(os.environ.get("FUSER_MANIFEST_DIR") or PACKAGE / "manifest")
ARCH_PATTERN = re.compile(r"^(cpu|sm_\d{2,3}a?)$")
FIELDS = ("op", "arch", "dtypes", "torch", "triton", "date", "cases", "commit", "fingerprint")
OPTIONAL_FIELDS = ("device", "fuzz")  # device: the GPU's name (CUDA); fuzz: fuzz-stage programs passed
VALIDATE_HINT = "validate it with `nox -s validate -- {op}` or opt in with FUSER_UNVALIDATED=fuse"


class ManifestError(ValueError):
    """A malformed manifest; the message names the file and line."""


@dataclass(frozen=True)
class Entry:
    op: str
    arch: str
    dtypes: tuple[str, ...]
    torch: str
    triton: str
    date: str
    cases: int
    commit: str
    fingerprint: str
    line: int  # of the entry's [[op]] header
    device: str = ""

    @property
    def fresh(self) -> bool:
        return self.fingerprint == gate_fingerprint(self.op, self.arch)


@dataclass(frozen=True)
class Manifest:
    arch: str
    path: Path
    entries: dict[str, Entry]


def arch_of(device: torch.device) -> str:
    """'cpu' for Triton's interpreter, 'sm_90' for a compute capability 9.0 device."""
    if device.type != "cuda":
        return "cpu"
    major, minor = torch.cuda.get_device_capability(device)
    return f"sm_{major}{minor}"


def manifest_path(arch: str, directory: Path | None = None) -> Path:
    return (directory or MANIFEST_DIR) / f"{arch}.toml"


def _entry_lines(text: str) -> list[int]:
    return [n for n, line in enumerate(text.splitlines(), 1) if line.strip() == "[[op]]"]


def parse(text: str, path: Path, arch: str | None = None) -> Manifest:
    """Read and check one manifest; `arch` defaults to the file's name."""
    arch = arch or path.stem
    where = str(path)
    if not ARCH_PATTERN.match(arch):
        raise ManifestError(f"{where}: unknown architecture {arch!r}: expected 'cpu' or 'sm_<major><minor>'")
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise ManifestError(f"{where}: not valid TOML: {error}") from None
    extra = sorted(set(data) - {"op"})
    if extra:
        raise ManifestError(
            f"{where}:1: unknown top-level key(s) {extra}: the file holds [[op]] entries only"
        )
    raw = data.get("op", [])
    if not isinstance(raw, list):
        raise ManifestError(f"{where}:1: 'op' must be an array of tables, written [[op]]")
    lines = _entry_lines(text)
    entries: dict[str, Entry] = {}
    known = lowerings()
    for index, item in enumerate(raw):
        line = lines[index] if index < len(lines) else 1
        at = f"{where}:{line}"
        if not isinstance(item, dict):
            raise ManifestError(f"{at}: an entry must be a table")
        missing = [f for f in FIELDS if f not in item]
        unknown = sorted(set(item) - set(FIELDS) - set(OPTIONAL_FIELDS))
        if missing or unknown:
            raise ManifestError(
                f"{at}: malformed entry: "
                + "; ".join(
                    ([f"missing {', '.join(missing)}"] if missing else [])
                    + ([f"unknown field(s) {', '.join(unknown)}"] if unknown else [])
                )
            )
        op = item["op"]
        if op not in known:
            raise ManifestError(
                f"{at}: unknown op {op!r}: the fuser lowers no such op (see fuser/lower/ops.py)"
            )
        if item["arch"] != arch:
            raise ManifestError(f"{at}: {op}: arch {item['arch']!r} in the manifest of {arch!r}")
        dtypes = item["dtypes"]
        if not isinstance(dtypes, list) or not dtypes or not all(isinstance(d, str) for d in dtypes):
            raise ManifestError(f"{at}: {op}: dtypes must be a non-empty list of dtype names")
        unsupported = [d for d in dtypes if d not in known[op].dtypes]
        if unsupported:
            raise ManifestError(
                f"{at}: {op}: dtype(s) {', '.join(unsupported)} are not lowered for this op "
                f"(it lowers {', '.join(known[op].dtypes)})"
            )
        if not isinstance(item["cases"], int) or isinstance(item["cases"], bool) or item["cases"] < 1:
            raise ManifestError(f"{at}: {op}: cases must be a positive integer")
        strings = [f for f in FIELDS if f not in ("dtypes", "cases") and not isinstance(item[f], str)]
        if strings:
            raise ManifestError(f"{at}: {op}: field(s) {', '.join(strings)} must be strings")
        if op in entries:
            raise ManifestError(f"{at}: {op}: a second entry (the first is at line {entries[op].line})")
        entries[op] = Entry(
            **{f: item[f] for f in FIELDS if f != "dtypes"},
            dtypes=tuple(dtypes),
            line=line,
            device=item.get("device", ""),
        )
    return Manifest(arch, path, entries)


def load(arch: str, directory: Path | None = None) -> Manifest | None:
    """The manifest of `arch`, or None when there is none."""
    path = manifest_path(arch, directory)
    if not path.exists():
        return None
    return parse(path.read_text(), path, arch)


@cache
def _cached(arch: str) -> Manifest | None:
    return load(arch)


def reload() -> None:
    """Read the manifests again (after the validation command writes one)."""
    _cached.cache_clear()
    _warned.clear()


_warned: set[str] = set()


def _no_manifest(arch: str) -> str:
    if arch not in _warned:
        _warned.add(arch)
        log.warning(
            "fuser: no validation manifest for %s (%s): every op runs eagerly on this device until it is "
            "validated here (`nox -s validate -- --all-unvalidated --device cuda`); "
            "to fuse unvalidated ops on purpose, set FUSER_UNVALIDATED=fuse "
            "(or options={'unvalidated': 'fuse'})",
            arch,
            manifest_path(arch),
        )
    return f"no validation manifest for {arch} ({manifest_path(arch).name})"


def obstacle(op: str, dtype: torch.dtype, device: torch.device) -> str | None:
    """Why `op` may not be fused for operands of `dtype` on `device`, or None if the manifest allows it."""
    arch = arch_of(device)
    manifest = _cached(arch)
    if manifest is None:
        return _no_manifest(arch)
    entry = manifest.entries.get(op)
    hint = VALIDATE_HINT.format(op=op)
    if entry is None:
        return f"not validated on {arch} (no entry in {manifest.path.name}); {hint}"
    if not entry.fresh:
        return f"its {arch} validation is stale (the lowering changed since {entry.date}); {hint}"
    name = DTYPE_NAMES.get(dtype, str(dtype))
    lowered = lowerings().get(op)
    if lowered is not None and name not in lowered.dtypes:
        return None  # not lowered for this dtype: the lowering leaves it eager, with its own reason
    if name not in entry.dtypes:
        return f"not validated on {arch} for {name} (validated: {', '.join(entry.dtypes)}); {hint}"
    return None


def node_obstacle(node: fx.Node) -> str | None:
    """The gate for one lowerable node: its op, on its device, for the dtype of its first tensor operand
    (the dtype a conformance case is named by), else of its result."""
    operands = [m for m in (tensor_meta(a) for a in node.all_input_nodes) if m is not None]
    value = operands[0] if operands else meta(node)
    return obstacle(op_name(node.target), value.dtype, meta(node).device)
