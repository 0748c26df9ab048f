"""How many manifest entries a planted change to shared code generation stales: the pointwise kernels'
block mask made off by one (`offset <= numel`), every lowered op's fingerprint computed before and after
on each architecture. `python tools/probes/stale_by_planted_mask.py` (about a minute on 2 cores)."""

from __future__ import annotations

from fuser.emit import codegen
from fuser.lower import lowerings


def all_fingerprints(arch: str) -> dict[str, str]:
    return {name: lowerings.compute_fingerprint(name, arch) for name in lowerings.lowerings()}


def main() -> None:
    before = {arch: all_fingerprints(arch) for arch in ("cpu", "sm_90")}
    source = codegen.PointwiseBuilder.source
    codegen.PointwiseBuilder.source = lambda self, name: source(self, name).replace(
        "offset < numel", "offset <= numel"
    )
    for arch, old in before.items():
        new = all_fingerprints(arch)
        stale = sorted(n for n in old if old[n] != new[n])
        fresh = sorted(set(old) - set(stale))
        print(f"{arch}: {len(stale)} of {len(old)} entries stale; still fresh: {', '.join(fresh)}")


if __name__ == "__main__":
    main()
