"""Reports of one conformance run (one backend on one device): JSON for tools, a Markdown op × dtype matrix
to paste into a pull request, and a few lines of summary for the terminal.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from conformance.specs.caseid import DIRECTIONS, DTYPES, CaseKey

# not_validated: the backend ran the op eagerly because it is not validated for this architecture and
# dtype (the fuser's manifest gate), so the case compared eager with eager: it failed, and is told apart.
OUTCOMES = ("passed", "failed", "xfailed", "xpassed", "skipped", "error", "not_validated")
# Outcomes that need someone's attention: an expected failure that passes means its ledger entry must go.
PROBLEMS = ("failed", "xpassed", "error")
LEGEND = (
    "✅ all that ran passed; ❌ k/n: k of n cases failed, errored or passed unexpectedly; "
    "🔒 k/n: k of n cases not validated (the backend ran the op eagerly: nothing tested); "
    "⚠️ expected failure (k/n when only some are); ⏭️ skipped; — not run."
)
XPASSED_MESSAGE = "passed, but the ledger expects it to fail: remove its entry"
META_SHOWN = ("tier", "torch", "triton", "date")
MESSAGE_CHARS = 200
SLOWEST = 5


@dataclass(frozen=True)
class CaseResult:
    key: CaseKey
    outcome: str  # one of OUTCOMES
    duration_s: float
    samples: int = 0  # how many samples the case ran
    message: str = ""  # the failure's first line, or the ledger's reason for an expected failure
    ulps: tuple[float, float] | None = None  # largest error in ulps of scale: (backend, eager), forward
    left_eager: str = ""  # why the backend ran the op eagerly inside its graph: eager checked against eager

    def __post_init__(self) -> None:
        if self.outcome not in OUTCOMES:
            raise ValueError(f"{self.key.test_id}: outcome {self.outcome!r} is not one of {OUTCOMES}")


def _counts(results: Sequence[CaseResult]) -> dict[str, int]:
    counted = Counter(result.outcome for result in results)
    return {outcome: counted[outcome] for outcome in OUTCOMES}


def _sorted(results: Sequence[CaseResult]) -> list[CaseResult]:
    return sorted(results, key=lambda result: result.key.test_id)


def _totals_line(results: Sequence[CaseResult]) -> str:
    """ "3 ops, 40 cases: 35 passed, 1 failed, ..." with every outcome, zeros included."""
    ops = len({result.key.op for result in results})
    counts = ", ".join(
        f"{count} {'errors' if outcome == 'error' and count != 1 else outcome.replace('_', ' ')}"
        for outcome, count in _counts(results).items()
    )
    line = f"{ops} ops, {len(results)} cases: {counts}"
    # Left eager for another reason (not counted as not validated above): those cases passed vacuously.
    eager = [result for result in results if result.left_eager and result.outcome != "not_validated"]
    if eager:
        line += (
            f"; {len(eager)} of them ran the op eagerly inside the backend (eager checked against eager,"
            f" e.g. {eager[0].key.op}: {eager[0].left_eager})"
        )
    return line


def _first_line(message: str) -> str:
    line = message.strip().split("\n", 1)[0].strip()
    return line if len(line) <= MESSAGE_CHARS else line[: MESSAGE_CHARS - 1] + "…"


def _case_json(result: CaseResult) -> dict[str, Any]:
    """A case, flat: its id, the fields of its key, then its outcome, time, samples and message."""
    fields = {field.name: getattr(result, field.name) for field in dataclasses.fields(result)}
    del fields["key"]
    return {"id": result.key.test_id, **dataclasses.asdict(result.key), **fields}


def case_from_json(case: Mapping[str, Any]) -> CaseResult:
    """A case as `to_json` wrote it, read back (tools/merge_reports.py merges sharded runs so)."""
    key = CaseKey(**{field.name: case[field.name] for field in dataclasses.fields(CaseKey)})
    fields = {
        field.name: case[field.name]
        for field in dataclasses.fields(CaseResult)
        if field.name != "key" and field.name in case  # older reports have no ulps
    }
    if fields.get("ulps") is not None:
        fields["ulps"] = tuple(fields["ulps"])
    return CaseResult(key, **fields)


def to_json(results: Sequence[CaseResult], meta: Mapping[str, Any]) -> dict[str, Any]:
    """The run as JSON: `meta` as given, totals per outcome, each op's counts, and every case."""
    by_op: dict[str, list[CaseResult]] = defaultdict(list)
    for result in results:
        by_op[result.key.op].append(result)
    totals = {"ops": len(by_op), "cases": len(results), **_counts(results)}
    totals["duration_s"] = round(sum(result.duration_s for result in results), 3)
    return {
        "meta": dict(meta),
        "totals": totals,
        "per_op": {op: _counts(by_op[op]) for op in sorted(by_op)},
        "cases": [_case_json(result) for result in _sorted(results)],
    }


def filename_safe(name: str) -> str:
    """`name` with anything but letters, digits, '.', '-' and '_' replaced: "my.mod:fn" -> "my.mod_fn"."""
    return re.sub(r"[^\w.-]+", "_", name).strip("._") or "_"


def write(results: Sequence[CaseResult], meta: Mapping[str, Any], directory: Path) -> tuple[Path, Path]:
    """Write conformance-<backend>-<device>.json and .md into `directory` (`meta` names the backend and
    device); return their paths."""
    stem = f"conformance-{filename_safe(str(meta['backend']))}-{filename_safe(str(meta['device']))}"
    directory.mkdir(parents=True, exist_ok=True)
    json_path, markdown_path = directory / f"{stem}.json", directory / f"{stem}.md"
    json_path.write_text(json.dumps(to_json(results, meta), indent=2) + "\n")
    markdown_path.write_text(markdown(results, meta))
    return json_path, markdown_path


def _cell(results: Sequence[CaseResult]) -> str:
    """One op × dtype × direction: its worst news first."""
    if not results:
        return "—"
    counts, total = _counts(results), len(results)
    if problems := sum(counts[outcome] for outcome in PROBLEMS):
        return f"❌ {problems}/{total}"
    if counts["not_validated"]:
        return f"🔒 {counts['not_validated']}/{total}"
    if counts["xfailed"]:
        return "⚠️" if counts["xfailed"] == total else f"⚠️ {counts['xfailed']}/{total}"
    return "✅" if counts["passed"] else "⏭️"


def _matrix(results: Sequence[CaseResult]) -> list[str]:
    """The legend and the op × dtype table: a row per op, a column per dtype that ran, a cell per direction."""
    groups: dict[tuple[str, str, str], list[CaseResult]] = defaultdict(list)
    for result in results:
        groups[result.key.op, result.key.dtype, result.key.direction].append(result)
    order = {name: index for index, name in enumerate(DTYPES)}
    dtypes = sorted(
        {dtype for _, dtype, _ in groups}, key=lambda dtype: (order.get(dtype, len(order)), dtype)
    )
    directions = [direction for direction in DIRECTIONS if any(key[2] == direction for key in groups)]
    lines = [f"A cell reads {' · '.join(directions)}. {LEGEND}", ""]
    lines += [f"| op | {' | '.join(dtypes)} |", f"|---|{'---|' * len(dtypes)}"]
    for op in sorted({op for op, _, _ in groups}):
        cells = [
            " · ".join(_cell(groups.get((op, dtype, direction), [])) for direction in directions)
            if any((op, dtype, direction) in groups for direction in directions)
            else "—"
            for dtype in dtypes
        ]
        lines.append(f"| `{op}` | {' | '.join(cells)} |")
    return lines


def known_line(meta: Mapping[str, Any]) -> str:
    """ "The suite knows 441 aten overloads: 326 ops and 115 in-place twins." (empty without the counts)"""
    counts = meta.get("known")
    if not counts:
        return ""
    return (
        f"The suite knows {counts['overloads']} aten overloads: {counts['not_inplace']} ops and "
        f"{counts['inplace_twins']} in-place twins."
    )


def markdown(results: Sequence[CaseResult], meta: Mapping[str, Any]) -> str:
    """The run as Markdown: heading, totals, the op × dtype matrix with its legend, and the failures."""
    details = [f"{name} {meta[name]}" for name in META_SHOWN if meta.get(name)]
    if meta.get("command"):
        details.append(f"`{meta['command']}`")
    lines = [f"### Conformance: `{meta.get('backend', '?')}` on {meta.get('device', '?')}", ""]
    lines += [_totals_line(results), *([" · ".join(details)] if details else [])]
    lines += [line for line in [known_line(meta)] if line] + [""]
    if not results:
        return "\n".join([*lines, "No cases ran.", ""])
    lines += [*_matrix(results), ""]
    lines += [*_precision(results), ""]
    lines += _not_validated(results)
    problems = [result for result in _sorted(results) if result.outcome in PROBLEMS]
    lines.append(f"#### Failures ({len(problems)})" if problems else "No failures.")
    for result in problems:
        message = _first_line(result.message) or (XPASSED_MESSAGE if result.outcome == "xpassed" else "")
        lines.append(f"- `{result.key.test_id}` — {result.outcome}" + (f": {message}" if message else ""))
    return "\n".join([*lines, ""])


def _not_validated(results: Sequence[CaseResult]) -> list[str]:
    """Per op, the dtypes whose cases were not validated and the backend's reason (with the command)."""
    by_op: dict[str, list[CaseResult]] = defaultdict(list)
    for result in _sorted(results):
        if result.outcome == "not_validated":
            by_op[result.key.op].append(result)
    if not by_op:
        return []
    lines = [f"#### Not validated ({sum(map(len, by_op.values()))} cases, {len(by_op)} ops)"]
    for op, cases in sorted(by_op.items()):
        dtypes = ", ".join(sorted({case.key.dtype for case in cases}))
        reason = _first_line(cases[0].left_eager or cases[0].message)
        lines.append(f"- `{op}` — {len(cases)} cases ({dtypes}): {reason}")
    return [*lines, ""]


def _precision(results: Sequence[CaseResult], rows: int = 15) -> list[str]:
    """The precision report: per op and dtype, the largest forward error in ulps of the result's scale
    against float64, the backend's beside eager's; the ops furthest from float64 first."""
    worst: dict[tuple[str, str], tuple[float, float]] = {}
    for result in results:
        if result.ulps is None or result.outcome == "not_validated":  # eager's own error, not the backend's
            continue
        key = (result.key.op, result.key.dtype)
        seen = worst.get(key, (0.0, 0.0))
        worst[key] = (max(seen[0], result.ulps[0]), max(seen[1], result.ulps[1]))
    if not worst:
        return []
    ranked = sorted(worst.items(), key=lambda item: item[1][0], reverse=True)
    lines = [
        f"#### Precision: ulps of the result's scale from float64 ({len(worst)} op × dtype, worst {min(rows, len(worst))})",
        "",
        "| op | dtype | backend | eager |",
        "|---|---|---|---|",
    ]
    lines += [
        f"| `{op}` | {dtype} | {mine:.1f} | {eager:.1f} |" for (op, dtype), (mine, eager) in ranked[:rows]
    ]
    return lines


def summary(results: Sequence[CaseResult]) -> str:
    """A few lines for the terminal: the totals and the slowest cases."""
    lines = [_totals_line(results)]
    slowest = sorted(results, key=lambda result: result.duration_s, reverse=True)[:SLOWEST]
    if slowest:
        lines.append(f"slowest {len(slowest)}:")
        lines += [f"  {r.duration_s:8.2f} s  {r.key.test_id}" for r in slowest]
    return "\n".join(lines)
