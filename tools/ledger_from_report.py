"""Draft expected-failure entries from a conformance report.

    python tools/ledger_from_report.py reports/conformance/conformance-fuser-cpu.json >> conformance/expected_failures.toml
    python tools/ledger_from_report.py REPORT --reasons causes.toml   # reasons by op, cases grouped

Without --reasons: one entry per failing case, its reason the failure's own first finding (what differed,
where), marked as an open bug of the backend. With --reasons (a TOML table: op = "reason"), a failing
case of a listed op takes that reason, and the cases of one op, dtype and direction that share a reason
become one entry listing their contexts (exactly the contexts that failed, so none passes as an XPASS).
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


def _toml_value(value) -> str:
    if isinstance(value, list):
        return "[" + ", ".join(f'"{v}"' for v in value) + "]" if len(value) > 1 else f'"{value[0]}"'
    return f'"{value}"'


def entries(report: dict, reasons: dict[str, str]) -> list[dict]:
    failing = [case for case in report["cases"] if case["outcome"] in ("failed", "error")]
    if not reasons:
        return [
            {
                **{f: case[f] for f in ("op", "backend", "device", "dtype", "direction", "context")},
                "reason": reason_of(case["message"]),
            }
            for case in failing
        ]
    groups: dict[tuple, list[str]] = defaultdict(list)
    for case in failing:
        reason = reasons.get(case["op"]) or reason_of(case["message"])
        key = (case["op"], case["backend"], case["device"], case["dtype"], case["direction"], reason)
        groups[key].append(case["context"])
    return [
        {
            "op": op,
            "backend": backend,
            "device": device,
            "dtype": dtype,
            "direction": direction,
            "context": sorted(contexts),
            "reason": reason,
        }
        for (op, backend, device, dtype, direction, reason), contexts in sorted(groups.items())
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("report", help="conformance-<backend>-<device>.json")
    parser.add_argument("--reasons", help="TOML: op = 'reason' for the ops whose cause is known")
    args = parser.parse_args()
    with open(args.report) as file:
        report = json.load(file)
    reasons = {}
    if args.reasons:
        with open(args.reasons, "rb") as file:
            reasons = tomllib.load(file)
    for entry in entries(report, reasons):
        print("\n[[xfail]]")
        for field, value in entry.items():
            text = value.replace('"', "'") if field == "reason" else value
            print(f"{field} = {_toml_value(text) if isinstance(text, list) else json.dumps(text)}")


if __name__ == "__main__":
    main()
