"""The zoo's report: a Markdown table for a pull request, JSON for tools, and the loss curves as a PNG."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

from conformance.harness.policy import BUDGETS, TRAINING
from conformance.zoo.check import ZooResult


def _number(value, digits: str = ".1f") -> str:
    return "—" if value is None or (isinstance(value, float) and math.isnan(value)) else format(value, digits)


def markdown(results: list[ZooResult]) -> str:
    lines = [
        "| model | precision | backend | verdict | worst parameter (error: backend / eager) | kernels | graph breaks "
        "| fallbacks | compile s | step ms (eager / backend) |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        verdict = "pass" if r.ok else f"**FAIL**: {r.problem}"
        worst = f"`{r.worst.name}` {r.worst.backend:.1e} / {r.worst.eager:.1e}" if r.worst else "—"
        lines.append(
            f"| {r.model} | {r.precision} | {r.backend} | {verdict} | {worst} | {_number(r.kernels, 'd')} "
            f"| {r.graph_breaks} | {_number(r.fallbacks, 'd')} | {_number(r.compile_seconds)} "
            f"| {_number(r.step_ms[0])} / {_number(r.step_ms[1])} |"
        )
    budgets = "; ".join(f"{p}: {b.factor}× eager's error + {b.floor:g} ({b.why})" for p, b in BUDGETS.items())
    training = (
        f"training: {TRAINING.factor}× eager's drift from float64 + {TRAINING.floor:g} ({TRAINING.why})"
    )
    note = f"Budgets (error relative to the gradient's largest float64 value): {budgets}; {training}."
    return "\n".join([*lines, "", note, ""])


def write(results: list[ZooResult], directory: Path, name: str) -> list[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    written = [directory / f"{name}.md", directory / f"{name}.json"]
    written[0].write_text(markdown(results))
    written[1].write_text(json.dumps([dataclasses.asdict(r) for r in results], indent=1, default=str))
    curves = [r for r in results if r.curve]
    if curves:
        written.append(_plot(curves, directory / f"{name}-training.png"))
    return written


def _plot(results: list[ZooResult], path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    columns = min(4, len(results))
    rows = math.ceil(len(results) / columns)
    figure, axes = plt.subplots(rows, columns, figsize=(3.2 * columns, 2.6 * rows), squeeze=False)
    for ax, r in zip(axes.flat, results, strict=False):
        ax.plot(r.curve["float64"], label="float64 eager", color="0.75", linewidth=4)
        ax.plot(r.curve["eager"], label="eager", linewidth=2)
        ax.plot(r.curve["backend"], label=r.backend, linestyle="--")
        ax.set_title(f"{r.model} {r.precision}", fontsize=9)
        ax.set_xlabel("step", fontsize=8)
        ax.tick_params(labelsize=7)
    for ax in list(axes.flat)[len(results) :]:
        ax.axis("off")
    axes.flat[0].legend(fontsize=7)
    figure.suptitle("training loss, eager vs backend (same weights, data and AdamW steps)", fontsize=10)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return path
