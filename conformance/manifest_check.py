"""Checks a validation manifest beyond what the fuser's loader checks: its JSON schema, that every entry
is fresh (its fingerprint is the lowering's today), and that its case count is what validating the op
here would run (a hand-edited count is caught). `python -m conformance.manifest_check [FILE ...]`
checks the committed manifests (CI runs it as tests/conformance/test_manifest.py).
"""

from __future__ import annotations

import json
import sys
import tomllib
from pathlib import Path

import jsonschema
import torch

from conformance.validate import expected_cases
from fuser import validation
from fuser.lowerings import fingerprint

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


def problems(path: Path, backend: str = "fuser") -> list[str]:
    """Everything wrong with one manifest file; [] when it is good. Case counts of a CUDA manifest are
    checked only where a CUDA device is (which dtypes eager supports depends on the device)."""
    text = path.read_text()
    found = schema_problems(text, path)
    if found:
        return found
    try:
        manifest = validation.parse(text, path)
    except validation.ManifestError as error:
        return [str(error)]
    device = "cpu" if manifest.arch == "cpu" else "cuda"
    for entry in manifest.entries.values():
        at = f"{path}:{entry.line}: {entry.op}"
        if backend == "fuser" and entry.fingerprint != fingerprint(entry.op, manifest.arch):
            found.append(
                f"{at}: stale: the lowering changed since it was validated ({entry.date}); "
                f"run `nox -s validate -- {entry.op}`"
            )
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
    paths = [Path(p) for p in argv] or sorted(validation.MANIFEST_DIR.glob("*.toml"))
    failed = False
    for path in paths:
        found = problems(path)
        for problem in found:
            print(problem)
        failed |= bool(found)
        print(f"{path}: {'FAILED' if found else 'ok'}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
