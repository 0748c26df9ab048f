"""The ledger of expected failures: `expected_failures.toml`, read, schema-checked and matched against cases.

Every field is validated, because a typo in an expected failure would otherwise silently disable
nothing (or the wrong thing). `Ledger.unused` finds entries that match no case of a run: the pytest
plugin turns them into an error, since a dead entry is a typo or a fixed bug.
"""

from __future__ import annotations

import difflib
import re
import tomllib
from collections.abc import Collection, Iterable
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

import jsonschema
from jsonschema.exceptions import ValidationError, best_match

from conformance.specs.caseid import BACKENDS, CONTEXTS, DEVICES, DIRECTIONS, DTYPES, CaseKey
from conformance.specs.tiers import TIER_NAMES

DEFAULT_PATH = Path(__file__).parents[1] / "expected_failures.toml"
ANY = "*"
# The names each scope field takes, besides "*"; any other backend is written "module:callable".
SCOPES: dict[str, tuple[str, ...]] = {
    "backend": (*BACKENDS, "module:callable"),
    "device": DEVICES,
    "dtype": DTYPES,
    "direction": DIRECTIONS,
    "context": CONTEXTS,
    "tier": TIER_NAMES,  # optional, default any: a case that fails on the full tier's samples only
}
MODULE_CALLABLE = r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$"


def _scope(item: dict[str, Any]) -> dict[str, Any]:
    """A scope field: "*", one name, or a non-empty list of distinct names (without "*")."""
    return {
        "type": ["string", "array"],
        "if": {"type": "string", "const": ANY},
        "else": {
            "if": {"type": "string"},
            "then": item,
            "else": {"items": item, "minItems": 1, "uniqueItems": True},
        },
    }


ENTRY_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["op", "backend", "device", "dtype", "direction", "reason"],
    "additionalProperties": False,
    "properties": {
        "op": {"type": "string", "pattern": r"^\w+\.\w+\.\w+$"},  # namespace.name.overload
        "backend": _scope(
            {"anyOf": [{"enum": list(BACKENDS)}, {"type": "string", "pattern": MODULE_CALLABLE}]}
        ),
        **{
            field: _scope({"enum": list(SCOPES[field])})
            for field in ("device", "dtype", "direction", "context", "tier")
        },
        "reason": {"type": "string", "pattern": r"\S"},
        # True where the case's outcome varies from run to run (eager's own answer is nondeterministic,
        # e.g. a CUDA kernel's atomics): a pass is then not an XPASS. The reason must say why.
        "outcome_varies": {"type": "boolean"},
        # A regular expression the case's failure message must match (searched): a case the entry covers that
        # fails otherwise fails the run, so the entry cannot hide another bug in the same cases.
        "fails_with": {"type": "string", "minLength": 1},
    },
}
FILE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "properties": {"xfail": {"type": "array", "items": {"type": "object"}}},
}


class LedgerError(ValueError):
    """The ledger file is malformed; the message names the file, the entry and the problem."""


def _problem(error: ValidationError) -> str:
    """The schema error in words a ledger editor acts on."""
    field = error.absolute_path[0] if error.absolute_path else None
    if error.validator == "additionalProperties":
        unknown = sorted(set(error.instance) - set(ENTRY_SCHEMA["properties"]))
        return f"unknown field(s) {', '.join(map(repr, unknown))}; fields are {', '.join(ENTRY_SCHEMA['properties'])}"
    if error.validator == "required":
        return f"{error.message}: scope must be explicit (write {ANY!r} for any)"
    if field == "reason" and error.validator == "pattern":
        return "reason is empty: say why, in words"
    if field == "op" and error.validator == "pattern":
        return f"op: {error.instance!r} is not an overload name such as 'aten.add.Tensor'"
    if field in SCOPES and error.validator in ("enum", "anyOf", "pattern"):
        if error.instance == ANY:
            return f"{field}: {ANY!r} means any: write it alone, not in a list"
        return f"{field}: {error.instance!r} is not {ANY!r} or one of {', '.join(SCOPES[field])}"
    return f"{field}: {error.message}"


def _pattern_error(pattern: str | None) -> str | None:
    try:
        re.compile(pattern or "")
    except re.error as error:
        return f"not a regular expression ({error}): {pattern!r}"
    return None


def _names(value: str | list[str]) -> tuple[str, ...]:
    return (value,) if isinstance(value, str) else tuple(value)


@dataclass(frozen=True)
class Entry:
    """One expected failure; each scope tuple is ("*",) for any."""

    op: str
    backends: tuple[str, ...]
    devices: tuple[str, ...]
    dtypes: tuple[str, ...]
    directions: tuple[str, ...]
    contexts: tuple[str, ...]
    reason: str
    tiers: tuple[str, ...] = (ANY,)
    outcome_varies: bool = False
    fails_with: str | None = None

    def covers(self, backend: str, device: str) -> bool:
        """Whether the entry applies to runs of this backend on this device."""
        return all(
            ANY in names or value in names
            for names, value in ((self.backends, backend), (self.devices, device))
        )

    def matches(self, key: CaseKey, tier: str | None = None) -> bool:
        """Whether the entry expects `key` to fail in `tier` (None: in some tier)."""
        scopes = ((self.dtypes, key.dtype), (self.directions, key.direction), (self.contexts, key.context))
        if tier is not None:
            scopes += ((self.tiers, tier),)
        return (
            key.op == self.op
            and self.covers(key.backend, key.device)
            and all(ANY in names or value in names for names, value in scopes)
        )


@dataclass(frozen=True)
class Ledger:
    path: Path
    entries: tuple[Entry, ...]

    @classmethod
    def load(cls, path: Path | None = None, known_ops: Collection[str] | None = None) -> Ledger:
        """The ledger at `path` (default: the packaged one), validated; with `known_ops`, every op must be one."""
        path = path or DEFAULT_PATH
        try:
            data = tomllib.loads(path.read_text())
        except tomllib.TOMLDecodeError as error:
            raise LedgerError(f"{path}: not valid TOML: {error}") from error
        if (error := best_match(jsonschema.Draft202012Validator(FILE_SCHEMA).iter_errors(data))) is not None:
            raise LedgerError(f"{path}: {error.message} (the file holds [[xfail]] tables only)")
        problems, entries = [], []
        validator = jsonschema.Draft202012Validator(ENTRY_SCHEMA)
        for index, raw in enumerate(data.get("xfail", [])):
            op = raw.get("op")
            if (error := best_match(validator.iter_errors(raw))) is not None:
                problems.append(f"{path}: xfail entry {index} (op {op!r}): {_problem(error)}")
            elif known_ops is not None and op not in known_ops:
                close = difflib.get_close_matches(op, list(known_ops), n=1)
                hint = f"; did you mean {close[0]!r}?" if close else ""
                problems.append(
                    f"{path}: xfail entry {index} (op {op!r}): unknown op {op!r} "
                    f"(a typo would silently disable nothing: fix it){hint}"
                )
            elif (pattern_error := _pattern_error(raw.get("fails_with"))) is not None:
                problems.append(f"{path}: xfail entry {index} (op {op!r}): fails_with: {pattern_error}")
            else:
                scopes = (_names(raw[field]) for field in ("backend", "device", "dtype", "direction"))
                context, tiers = _names(raw.get("context", ANY)), _names(raw.get("tier", ANY))
                reason, varies = raw["reason"].strip(), raw.get("outcome_varies", False)
                entries.append(Entry(op, *scopes, context, reason, tiers, varies, raw.get("fails_with")))
        if problems:
            raise LedgerError("\n".join(problems))
        return cls(path, tuple(entries))

    @cached_property
    def _by_op(self) -> dict[str, list[Entry]]:
        """The entries of each op, in file order: a collection matches ~10,000 cases against them."""
        found: dict[str, list[Entry]] = {}
        for entry in self.entries:
            found.setdefault(entry.op, []).append(entry)
        return found

    def match(self, key: CaseKey, tier: str | None = None) -> Entry | None:
        """The first entry that expects the case to fail (in `tier`, where given), if any."""
        return next((entry for entry in self._by_op.get(key.op, ()) if entry.matches(key, tier)), None)

    def unused(self, keys: Iterable[CaseKey], backend: str, device: str) -> list[Entry]:
        """Entries that cover this backend and device but are the match of none of `keys`.

        An entry shadowed by an earlier one is unused too. Pass every case of the run: on a subset
        (`pytest -k`) entries for the cases left out are reported."""
        used = {id(self.match(key, tier)) for key in keys for tier in TIER_NAMES}
        return [entry for entry in self.entries if entry.covers(backend, device) and id(entry) not in used]
