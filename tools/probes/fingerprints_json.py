"""Every lowered op's fingerprint on cpu and sm_90, computed here, as JSON on stdout: compare two
machines' (Python, torch and triton versions) to check that fingerprints do not depend on them."""

import json
import platform
import sys

import torch
import triton

from fuser.lower import lowerings

found = {
    arch: {n: lowerings.compute_fingerprint(n, arch) for n in lowerings.lowerings()}
    for arch in ("cpu", "sm_90")
}
json.dump(
    {"versions": [platform.python_version(), torch.__version__, triton.__version__], **found},
    sys.stdout,
    indent=1,
)
