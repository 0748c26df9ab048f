"""Draft expected-failure entries from a conformance report.

    python tools/ledger_from_report.py reports/conformance/conformance-fuser-cpu.json >> conformance/expected_failures.toml
    python tools/ledger_from_report.py REPORT --reasons causes.toml   # reasons by op, cases grouped
    python tools/ledger_from_report.py REPORT --this-tier   # scoped to the report's tier (`tier = "full"`)

Each failing case's reason is its failure's own first finding (what differed, where), marked as an open
bug of the backend, or, with --reasons (a TOML table: op = "reason"), its op's reason there. The cases of
one op, dtype and direction that share a reason become one entry listing their contexts (exactly the
contexts that failed, so none passes as an XPASS). --this-tier scopes each entry to the report's tier:
for failures the full tier's samples find and the quick tier's pass (unscoped, they would XPASS there).
Review the diff before committing.
"""

from __future__ import annotations

import argparse
import json
import re
import tomllib
from collections import defaultdict


def reason_of(message: str) -> str:
    lines = [line.strip() for line in message.splitlines() if line.strip()]
    found = next((line for line in lines if line.startswith(("output:", "gradients:", "inputs after"))), None)
    if "raised" in lines[0]:
        found = re.sub(r"^.*raised ", "the compiled program raises ", lines[0])
    text = (found or lines[0]).replace('"', "'")
    return f"open bug found by the suite: {text[:300]}"


def entries(report: dict, reasons: dict[str, str]) -> list[dict]:
    """Failing cases of one op, dtype and direction that share a reason, as one entry naming exactly
    their contexts (a reason from `reasons` by op, else the failure's own first finding)."""
    groups: dict[tuple, list[str]] = defaultdict(list)
    for case in report["cases"]:
        if case["outcome"] in ("failed", "error"):
            reason = (reasons.get(case["op"]) or reason_of(case["message"])).replace('"', "'")
            key = (case["op"], case["backend"], case["device"], case["dtype"], case["direction"], reason)
            groups[key].append(case["context"])
    fields = ("op", "backend", "device", "dtype", "direction", "reason")
    return [
        {**dict(zip(fields, key, strict=True)), "context": sorted(contexts)}
        for key, contexts in sorted(groups.items())
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("report", help="conformance-<backend>-<device>.json")
    parser.add_argument("--reasons", help="TOML: op = 'reason' for the ops whose cause is known")
    parser.add_argument("--this-tier", action="store_true", help="scope each entry to the report's tier")
    args = parser.parse_args()
    with open(args.report) as file:
        report = json.load(file)
    reasons = {}
    if args.reasons:
        with open(args.reasons, "rb") as file:
            reasons = tomllib.load(file)
    for entry in entries(report, reasons):
        print("\n[[xfail]]")
        for field in ("op", "backend", "device", "dtype", "direction", "context", "reason"):
            value = entry[field]
            print(f"{field} = {json.dumps(value[0] if field == 'context' and len(value) == 1 else value)}")
        if args.this_tier:
            print(f"tier = {json.dumps(report['meta']['tier'])}")


if __name__ == "__main__":
    main()
