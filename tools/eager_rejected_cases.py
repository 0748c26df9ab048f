"""The full-tier cases in which eager rejects a sample: the only cases where the full tier's eager-rejects
check (`conformance.harness.runner.answers_where_eager_raised`) compiles anything. Finding them runs eager
alone (no compile, no reference), so the check can be run over the whole full tier by running just these:

    python tools/eager_rejected_cases.py --device cpu [--ops A,B] > cases.txt   # one test id a line
    pytest conformance/test_ops.py --conformance-tier full --conformance-op <the ops> ... -k <ids>

Each line is `<test id>\t<eager's errors>`; a summary goes to stderr.
"""

from __future__ import annotations

import argparse
import sys

from conformance import plugin
from conformance.harness.runner import EagerRejected, expect_eager, on_device
from conformance.specs.catalog import SPECS
from conformance.specs.samples import iter_samples


def eager_errors(key) -> set[str]:
    """Eager's distinct errors over the case's samples (as the runner words them), empty if none."""
    spec, errors = SPECS[key.op], set()
    for sample in iter_samples(spec, key.dtype, "full"):
        try:
            expect_eager(spec, key.context, on_device(sample, key.device), key.direction == "bwd")
        except EagerRejected as error:
            cause = error.__cause__
            errors.add(f"{type(cause).__name__}: {str(cause).splitlines()[0][:120] if str(cause) else ''}")
        except Exception:
            pass  # rejected otherwise (a self-overlapping in-place write): not compiled by the check
    return errors


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--backend", default="fuser")
    parser.add_argument("--ops", help="comma-separated overloads (default: every op in the catalog)")
    options = parser.parse_args()
    ops = options.ops.split(",") if options.ops else list(SPECS)
    found = total = 0
    for op in ops:
        for key in plugin.cases(op, "full", options.backend, options.device):
            total += 1
            if errors := eager_errors(key):
                found += 1
                print(f"{key.test_id}\t{'; '.join(sorted(errors))}", flush=True)
    print(f"{found} of {total} full-tier cases have a sample eager rejects", file=sys.stderr)


if __name__ == "__main__":
    main()
