"""The conformance specs whose op no manifest entry of an architecture covers: decompositions of ops the
fuser lowers, and (with --in-place) in-place twins. Validation runs the full tier of manifest ops only, so
these ops' full tier runs nowhere regularly; this lists them for a run of it (printed comma-separated,
for --conformance-op).

    python tools/unmanifested_ops.py --arch sm_90 [--in-place]
"""

from __future__ import annotations

import argparse

from conformance.specs.catalog import SPECS
from conformance.validate import read_entries
from fuser.validate.validation import manifest_path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--arch", required=True, help="a manifest's architecture: cpu, sm_90, ...")
    parser.add_argument("--in-place", action="store_true", help="include in-place twins")
    args = parser.parse_args()
    covered = read_entries(manifest_path(args.arch), args.arch)
    # In-place twins are the catalog's "inplace" category, as its overload counts read them.
    ops = [op for op, s in SPECS.items() if op not in covered and (args.in_place or s.category != "inplace")]
    print(",".join(ops))


if __name__ == "__main__":
    main()
