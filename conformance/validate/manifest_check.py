"""Checks a validation manifest beyond what the fuser's loader checks: its JSON schema, that every entry
is fresh (its fingerprint is the kernels its op emits today), and that its case count is what
validating the op here would run (a hand-edited count is caught). `python -m conformance.validate.manifest_check
[FILE ...]` checks the committed manifests (CI runs it as tests/conformance/test_manifest.py).

CI's policy (docs/validation.md): a stale `cpu` entry fails, since CI's own kind of machine can mend it
(`nox -s validate -- --all-unvalidated`), and so does a lowered op with no `cpu` entry (the manifest covers
every lowered op since 2026-11-27: `MISSING_CPU_ENTRIES_FAIL`); a GPU manifest's stale or
missing entries cannot be mended without that GPU, so they are reported (`unvalidated`), not failed:
those ops run eagerly on that architecture until validated there again.
"""

from __future__ import annotations

import argparse
import json
import sys
import tomllib
from pathlib import Path

import jsonschema
import torch

from conformance.validate import expected_cases
from fuser.lower.lowerings import fingerprint, lowerings
from fuser.validate import validation

SCHEMA = json.loads((Path(__file__).parent / "manifest_schema.json").read_text())


def schema_problems(text: str, path: Path) -> list[str]:
    """Schema violations, each naming the file and the line of the entry it is in."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        return [f"{path}: not valid TOML: {error}"]
    lines = validation._entry_lines(text)
    problems = []
    for error in sorted(jsonschema.Draft202012Validator(SCHEMA).iter_errors(data), key=str):
        where = list(error.absolute_path)
        line = lines[where[1]] if len(where) > 1 and where[1] < len(lines) else 1
        field = ".".join(map(str, where[2:])) or "entry"
        problems.append(f"{path}:{line}: {field}: {error.message}")
    return problems


MEND = "nox -s validate -- --all-unvalidated"
# The cpu manifest covers every lowered op (2026-11-27): a missing cpu entry fails too, as a stale one.
MISSING_CPU_ENTRIES_FAIL = True


def unvalidated(manifest: validation.Manifest) -> list[str]:
    """Each lowered op without a fresh entry in `manifest`: stale (its kernels changed since it was
    validated) or missing."""
    found = []
    for op in lowerings():
        entry = manifest.entries.get(op)
        if entry is None:
            found.append(f"{op}: no entry in {manifest.path.name}")
        elif entry.fingerprint != fingerprint(op, manifest.arch):
            found.append(f"{op}: stale: its kernels changed since it was validated ({entry.date})")
    return found


def problems(path: Path, backend: str = "fuser") -> list[str]:
    """Everything wrong with one manifest file; [] when it is good. A `cpu` manifest must cover every
    lowered op with a fresh entry; a GPU manifest's stale or missing entries are not problems
    (`unvalidated` lists them). Case counts of a CUDA manifest are checked only where a CUDA device is
    (which dtypes eager supports depends on the device)."""
    text = path.read_text()
    found = schema_problems(text, path)
    if found:
        return found
    try:
        manifest = validation.parse(text, path)
    except validation.ManifestError as error:
        return [str(error)]
    device = "cpu" if manifest.arch == "cpu" else "cuda"
    if backend == "fuser" and manifest.arch == "cpu":
        failing = [g for g in unvalidated(manifest) if MISSING_CPU_ENTRIES_FAIL or "no entry" not in g]
        found += [f"{path}: {line}; run `{MEND}`" for line in failing]
    for entry in manifest.entries.values():
        at = f"{path}:{entry.line}: {entry.op}"
        if device == "cuda" and not torch.cuda.is_available():
            continue
        expected = expected_cases(entry.op, backend, device)
        if entry.cases != expected:
            found.append(
                f"{at}: cases = {entry.cases}, but validating it here runs {expected} cases "
                "(hand-edited? validate it again)"
            )
    return found


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m conformance.validate.manifest_check", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("files", nargs="*", type=Path, help="manifests (default: every committed one)")
    paths = parser.parse_args(argv).files or sorted(validation.MANIFEST_DIR.glob("*.toml"))
    missing = [str(p) for p in paths if not p.is_file()]
    if missing:
        parser.error(f"no such manifest: {', '.join(missing)}")
    failed = False
    for path in paths:
        found = problems(path)
        for problem in found:
            print(problem)
        failed |= bool(found)
        manifest = validation.parse(path.read_text(), path) if not found else None
        gaps = [g for g in unvalidated(manifest) if g not in "".join(found)] if manifest is not None else []
        for gap in gaps:
            device = "" if manifest.arch == "cpu" else " --device cuda"
            print(f"{path}: {gap} (runs eagerly on {manifest.arch} until `{MEND}{device}` there)")
        print(
            f"{path}: {'FAILED' if found else 'ok'}" + (f", {len(gaps)} op(s) not validated" if gaps else "")
        )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
