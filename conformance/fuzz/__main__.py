"""`python -m conformance.fuzz --examples N --seed S --backend B --device D --profile P`."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from conformance.fuzz.run import PROFILES, fuzz
from conformance.runner import resolve_backend


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m conformance.fuzz", description=__doc__)
    parser.add_argument(
        "--backend", default="fuser", help="fuser, inductor, aot_eager, eager or module:callable"
    )
    parser.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    parser.add_argument("--profile", default="ci", choices=sorted(PROFILES))
    parser.add_argument("--examples", type=int, help="how many programs (default: the profile's)")
    parser.add_argument(
        "--seed", type=int, help="draw other programs than the profile's (ci is derandomized)"
    )
    parser.add_argument("--out", type=Path, default=Path("reports/fuzz"), help="where repro_<id>.py go")
    parser.add_argument("--max-nodes", type=int, default=5, help="the most nodes a program has")
    parser.add_argument("--no-backward", action="store_true", help="compare outputs only, not gradients")
    options = parser.parse_args(argv)
    try:
        resolve_backend(options.backend)
    except ValueError as error:
        parser.error(str(error))
    if options.examples is not None and options.examples < 1:
        parser.error(f"--examples {options.examples}: must be at least 1")
    report = fuzz(
        options.backend,
        options.device,
        options.profile,
        examples=options.examples,
        seed=options.seed,
        out=options.out,
        backward=not options.no_backward,
        max_nodes=options.max_nodes,
    )
    print(report.summary())
    if report.mostly_vacuous:
        print(
            f"FAILED: {report.counts['vacuous']} programs compiled nothing against {report.counts['pass']} "
            "checked: the run proves little (for the fuser, FUSER_UNVALIDATED=fuse fuzzes its lowerings)"
        )
    return 1 if report.failure is not None or report.mostly_vacuous else 0


if __name__ == "__main__":
    sys.exit(main())
