"""Merge the JSON reports of a sharded conformance run (`--shard K/N`, one report per shard) into one:

    python tools/merge_reports.py shard1.json shard2.json shard3.json --out records/NAME

writes NAME.md (the whole run's matrix, as `nox -s conformance` writes it) and NAME.json (meta, totals
and each op's counts for the whole run, each shard's meta, and the failed, errored and not validated
cases with their full messages; passing cases are left out to keep the record small). Shards must share
backend, device and tier, and no case may appear in two of them.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from conformance.harness import report

SAME = ("backend", "device", "tier")


def load(paths: list[str]) -> tuple[list[report.CaseResult], list[dict]]:
    results, metas, seen = [], [], set()
    for path in paths:
        data = json.loads(Path(path).read_text())
        metas.append(data["meta"])
        for case in data["cases"]:
            if case["id"] in seen:
                raise SystemExit(f"{path}: case {case['id']} is in another shard too")
            seen.add(case["id"])
            results.append(report.case_from_json(case))
    for name in SAME:
        values = {str(meta.get(name)) for meta in metas}
        if len(values) > 1:
            raise SystemExit(f"the shards differ in {name}: {', '.join(sorted(values))}")
    return results, metas


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("reports", nargs="+", help="conformance-<backend>-<device>.json of each shard")
    parser.add_argument("--out", required=True, help="path and stem of the merged record (no suffix)")
    args = parser.parse_args()
    results, metas = load(args.reports)
    meta = {**metas[0], "command": "; ".join(m["command"] for m in metas), "shards": len(metas)}
    merged = report.to_json(results, meta)
    merged["shard_meta"] = metas
    merged["cases"] = [
        case for case in merged["cases"] if case["outcome"] in ("failed", "error", "not_validated")
    ]
    out = Path(args.out)
    out.with_suffix(".json").write_text(json.dumps(merged, indent=1) + "\n")
    out.with_suffix(".md").write_text(report.markdown(results, meta))
    print(report.summary(results))


if __name__ == "__main__":
    main()
