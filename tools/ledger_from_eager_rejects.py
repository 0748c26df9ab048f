"""Draft ledger entries for one device from the eager-rejects check's failures, with the causes another
device's entries already give (the CPU's, attributed in session 44):

    python tools/ledger_from_eager_rejects.py failures.tsv --device cuda --like cpu >> conformance/expected_failures.toml

`failures.tsv` is `tools/eager_rejected_cases.py --check` output (`<test id>\\t<failure>` lines; others are
skipped). A failure the ledger already expects on `--device` (in the full tier, its `fails_with` matching)
is left out. Another takes the reason, backends and `fails_with` of the `--like` entry that would expect it
on that device; the cases of one op, direction and reason become entries that name exactly the dtypes and
contexts that failed (none passes as an XPASS), scoped to the full tier. A failure no entry explains is
listed on stderr, to be attributed by hand. Review the diff before committing.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import re
import sys
from collections import defaultdict
from pathlib import Path

from conformance.harness.ledger import Entry, Ledger
from conformance.specs.caseid import CaseKey


def failures(path: str, backend: str, device: str) -> dict[CaseKey, list[str]]:
    """Each failing case's failures, by case."""
    found: dict[CaseKey, list[str]] = defaultdict(list)
    with open(path) as file:
        for line in file:
            test_id, tab, failure = line.rstrip("\n").partition("\t")
            if not tab or test_id.startswith("#"):
                continue
            op, dtype, context, direction = test_id.rsplit("-", 3)
            found[CaseKey(op, dtype, context, direction, backend, device)].append(failure)
    return found


def explains(entry: Entry | None, messages: list[str]) -> bool:
    """Whether `entry` expects every one of these failures."""
    if entry is None:
        return False
    return entry.fails_with is None or all(re.search(entry.fails_with, m) for m in messages)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("failures", help="tools/eager_rejected_cases.py --check output")
    parser.add_argument("--device", required=True, help="the device the failures were found on")
    parser.add_argument("--like", default="cpu", help="the device whose entries give the causes")
    parser.add_argument("--backend", default="fuser")
    parser.add_argument("--ledger", type=Path, help="the ledger to read (default: the suite's)")
    args = parser.parse_args()
    ledger = Ledger.load(args.ledger)
    groups: dict[tuple[str, str, Entry], dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
    unexplained = 0
    for key, messages in failures(args.failures, args.backend, args.device).items():
        if explains(ledger.match(key, "full"), messages):
            continue
        like = ledger.match(dataclasses.replace(key, device=args.like), "full")
        if not explains(like, messages):
            unexplained += 1
            print(f"unexplained: {key.test_id}\t{messages[0]}", file=sys.stderr)
            continue
        groups[(key.op, key.direction, like)][key.dtype].add(key.context)
    for (op, direction, like), contexts_by_dtype in groups.items():
        by_contexts: dict[tuple[str, ...], list[str]] = defaultdict(list)
        for dtype, contexts in contexts_by_dtype.items():
            by_contexts[tuple(sorted(contexts))].append(dtype)
        for contexts, dtypes in by_contexts.items():
            entry = {
                "op": op,
                "backend": list(like.backends) if len(like.backends) > 1 else like.backends[0],
                "device": args.device,
                "dtype": dtypes if len(dtypes) > 1 else dtypes[0],
                "direction": direction,
                "context": list(contexts) if len(contexts) > 1 else contexts[0],
                "tier": "full",
                "reason": like.reason,
                "fails_with": like.fails_with,
            }
            print("\n[[xfail]]")
            for field, value in entry.items():
                if value is not None:
                    print(f"{field} = {json.dumps(value)}")
    print(f"{unexplained} failing case(s) no entry explains", file=sys.stderr)


if __name__ == "__main__":
    main()
