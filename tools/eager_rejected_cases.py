"""The full-tier cases in which eager rejects a sample: the only cases where the full tier's eager-rejects
check (`conformance.harness.runner.answers_where_eager_raised`) compiles anything. Finding them runs eager
alone (no compile, no reference), so the check can be run over the whole full tier by running just these:

    python tools/eager_rejected_cases.py --device cpu [--ops A,B] > cases.txt
    python tools/eager_rejected_cases.py --device cpu --check > failures.txt

Each line is `<test id>\t<eager's errors>`, or with `--check` (the check itself, against `--backend`, as
the full tier runs it, in these cases only) `<test id>\t<failure>` for each sample the backend answered;
a summary goes to stderr. A failure found so is then run as its case (`pytest conformance/test_ops.py
--conformance-tier full ...`), where the ledger applies.
"""

from __future__ import annotations

import argparse
import sys

from conformance import plugin
from conformance.harness.runner import (
    EagerRejected,
    answers_where_eager_raised,
    expect_eager,
    on_device,
    rejection_reason,
)
from conformance.specs.catalog import SPECS
from conformance.specs.samples import iter_samples


def eager_errors(key) -> dict:
    """Eager's distinct errors over the case's samples (as the runner words them), each with the first
    sample it rejected, as `conformance.harness.runner.run_case` collects them."""
    spec, errors = SPECS[key.op], {}
    for sample in iter_samples(spec, key.dtype, "full"):
        sample = on_device(sample, key.device)
        try:
            expect_eager(spec, key.context, sample, key.direction == "bwd")
        except EagerRejected as error:
            errors.setdefault(rejection_reason(error), sample)
        except Exception:
            pass  # rejected otherwise (a self-overlapping in-place write): not compiled by the check
    return errors


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--backend", default="fuser")
    parser.add_argument("--ops", help="comma-separated overloads (default: every op in the catalog)")
    parser.add_argument(
        "--check", action="store_true", help="run the check against the backend in those cases"
    )
    parser.add_argument("--shard", default="1/1", help="K/N: every Nth op from the Kth (one process a core)")
    options = parser.parse_args()
    k, n = map(int, options.shard.split("/"))
    ops = (options.ops.split(",") if options.ops else list(SPECS))[k - 1 :: n]
    found = total = failed = 0
    for op in ops:
        for key in plugin.cases(op, "full", options.backend, options.device):
            total += 1
            if not (errors := eager_errors(key)):
                continue
            found += 1
            if not options.check:
                print(f"{key.test_id}\t{'; '.join(sorted(errors))}", flush=True)
                continue
            failures = answers_where_eager_raised(
                SPECS[op], key.context, options.backend, errors, key.direction == "bwd"
            )
            failed += bool(failures)
            for failure in failures:
                print(f"{key.test_id}\t{failure}", flush=True)
        print(f"done {op}", file=sys.stderr, flush=True)  # what a run cut off finished: resume with --ops
    print(f"{found} of {total} full-tier cases have a sample eager rejects", file=sys.stderr)
    if options.check:
        print(f"{failed} of them: {options.backend} answered where eager raised", file=sys.stderr)


if __name__ == "__main__":
    main()
