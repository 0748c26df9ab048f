"""Draft expected-failure entries from a conformance report: one entry per failing case.

    python tools/ledger_from_report.py reports/conformance/conformance-fuser-cpu.json >> conformance/expected_failures.toml

Each entry's reason is the failure's own first finding (what differed, where), marked as an open bug
of the backend; edit it into a diagnosis where one is known. Review the diff before committing.
"""

from __future__ import annotations

import argparse
import json
import re


def reason_of(message: str) -> str:
    lines = [line.strip() for line in message.splitlines() if line.strip()]
    found = next((line for line in lines if line.startswith(("output:", "gradients:", "inputs after"))), None)
    if "raised" in lines[0]:
        found = re.sub(r"^.*raised ", "the compiled program raises ", lines[0])
    text = (found or lines[0]).replace('"', "'")
    return f"open bug found by the suite: {text[:300]}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("report", help="conformance-<backend>-<device>.json")
    args = parser.parse_args()
    with open(args.report) as file:
        report = json.load(file)
    for case in report["cases"]:
        if case["outcome"] not in ("failed", "error"):
            continue
        print("\n[[xfail]]")
        for field in ("op", "backend", "device", "dtype", "direction", "context"):
            print(f'{field} = "{case[field]}"')
        print(f'reason = "{reason_of(case["message"])}"')


if __name__ == "__main__":
    main()
