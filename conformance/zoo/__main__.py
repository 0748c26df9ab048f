"""`python -m conformance.zoo`: real transformers and timm models under a backend, against float64 eager.

    python -m conformance.zoo                                   # every model, fuser, fp32 and bf16, CPU
    python -m conformance.zoo --backend inductor --model llama,t5 --precision fp32
    python -m conformance.zoo --device cuda --steps 20 --out reports/zoo

Exit status: 0 when every row passes, 1 when any fails, 2 when transformers or timm is missing.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from conformance.harness.collector import collect_if_grown, tune_for_compiling
from conformance.harness.runner import resolve_backend
from conformance.zoo import deps


def _listed(value: str) -> list[str]:
    return [part for part in value.split(",") if part]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m conformance.zoo", description=__doc__.splitlines()[0])
    parser.add_argument(
        "--backend", type=_listed, default=["fuser"], help="comma-separated; module:callable too"
    )
    parser.add_argument("--model", type=_listed, default=None, help="comma-separated names (default: all)")
    parser.add_argument("--precision", type=_listed, default=["fp32", "bf16"], help="fp32, bf16 (autocast)")
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument("--steps", type=int, default=20, help="training steps compared with eager (0: none)")
    parser.add_argument("--out", type=Path, default=Path("reports/zoo"))
    args = parser.parse_args(argv)

    problem = deps.missing()
    if problem:
        print(f"zoo: skipped: {problem}")
        return 2
    from conformance.harness.policy import BUDGETS
    from conformance.zoo.check import check_model
    from conformance.zoo.models import BY_NAME, ZOO
    from conformance.zoo.report import markdown, write

    unknown = [m for m in args.model or [] if m not in BY_NAME] + [
        p for p in args.precision if p not in BUDGETS
    ]
    if unknown:
        parser.error(
            f"unknown model or precision {unknown}; models: {', '.join(BY_NAME)}; precisions: fp32, bf16"
        )
    models = [BY_NAME[m] for m in args.model] if args.model else ZOO
    tune_for_compiling()
    results = []
    for backend in args.backend:
        compiler = resolve_backend(backend)
        for zoo in models:
            for precision in args.precision:
                start = time.perf_counter()
                result = check_model(zoo, compiler, precision, args.device, train_steps=args.steps)
                collect_if_grown()
                result.backend = backend
                results.append(result)
                verdict = "pass" if result.ok else f"FAIL: {result.problem}"
                print(
                    f"{zoo.name:14s} {precision} {backend:10s} {verdict} ({time.perf_counter() - start:.0f} s)"
                )
    name = f"zoo-{'-'.join(args.backend)}-{args.device}".replace(":", "_").replace(".", "_")
    paths = write(results, args.out, name)
    print(markdown(results))
    print("wrote " + ", ".join(str(p) for p in paths))
    return 0 if all(r.ok for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
