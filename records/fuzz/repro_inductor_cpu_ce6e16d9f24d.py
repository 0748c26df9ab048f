"""Fuzz repro ce6e16d9f24d: a program on which backend 'inductor' (cpu) and eager differ.

Found by `python -m conformance.fuzz` (profile dev, seed 2); shrunk by hypothesis to 2 op(s).

What the fuzzer saw:
    the compiled program raised InductorError: CppCompileError: C++ compile error

    Command:
    g++ /tmp/torchinductor_root/xj/cxjbtl4zzeawvxqlvmadr2v3er4jj7jfrmovs25l2p4yknva3had.main.cpp -D TORCH_INDUCTOR_CPP_WRAPPER -D STANDALONE_TORCH_HEADER -D TORCH_INDUCTOR_PRECOMPILE_HEADERS -D C10_USING_CUSTOM_GENERATED_MACROS -D CPU_CAPABILITY_AVX512 -O3 -DNDEBUG -fno-omit-frame-pointer -g1 -fno-trapping-math -funsafe-math-optimizations -ffinite-math-only -fno-signed-zeros -fno-finite-math-only -fno-unsafe-math-optimizations -fmath-errno -ffp-contract=off -fexcess-precision=fast -fno-tree-loop-vectorize -march=native -shared -fPIC -Wall -std=c++20 -Wno-unused-variable -Wno-unknown-pragmas -pedantic -fopenmp -include /tmp/torchinductor_root/precompiled_headers/cnbuzdbw64e4vvlh4eugjecddwbfeiokfngmjilznxy5o2sadbic.h -I/root/.pyenv/versions/3.11.7/include/python3.11 -I/root/.pyenv/versions/3.11.7/lib/python3.11/site-packages/torch/include -I/root/.pyenv/versions/3.11.7/lib/python3.11/site-packages/torch/include/torch/csrc/api/include -mavx512f -mavx512dq -mavx512vl -mavx512bw -mfma -mavx512vnni -mavx512vl -o /tmp/torchinductor_root/xj/cxjbtl4zzeawvxqlvmadr2v3er4jj7jfrmovs25l2p4yknva3had.main.so -ltorch -ltorch_cpu -ltorch_python -lgomp -L/root/.pyenv/versions/3.11.7/lib -L/root/.pyenv/versions/3.11.7/lib/python3.11/site-packages/torch/lib

    Output:
    /tmp/torchinductor_root/xj/cxjbtl4zzeawvxqlvmadr2v3er4jj7jfrmovs25l2p4yknva3had.main.cpp: In function ‘void kernel(const bool*, bool*)’:
    /tmp/torchinductor_root/xj/cxjbtl4zzeawvxqlvmadr2v3er4jj7jfrmovs25l2p4yknva3had.main.cpp:20:57: error: no matching function for call to ‘max_masked_reduce(at::vec::CPU_CAPABILITY::VecMask<float, 1>&, at::vec::CPU_CAPABILITY::VecMask<int, 1>&, int64_t)’
       20 |                         tmp_acc0_vec = max_masked_reduce(tmp_acc0_vec, tmp2, static_cast<int64_t>(3L));
          |                                        ~~~~~~~~~~~~~~~~~^~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
    In file included from /tmp/torchinductor_root/precompiled_headers/cnbuzdbw64e4vv

Run: python repro_ce6e16d9f24d.py    (needs torch and the backend; exits 1 while the two differ)
"""

import base64
import io
import sys
import zlib
from math import inf, nan  # noqa: F401 (the program may use them)

import torch

BACKEND = "inductor"
DEVICE = "cpu"
RTOL, ATOL = (0.0, 0.0)
BACKWARD = False  # also compare the gradients of every floating input
SEED = 0  # of the gradients flowing into the outputs


def program(v0):
    v1 = torch.ops.aten.add.Tensor(v0, v0)
    v2 = torch.ops.aten.max.dim(v1, dim=-1, keepdim=False)[0]
    return (v2,)


# The inputs, exactly as the fuzzer made them:
#   v0: bool[3] (contiguous)
INPUTS = (
    "eNqlVDFv00AUPtuNEwxKW5aKDhmYggRunMRxQoEiC3nxQBpUFFVClutcg4Ub9+xLKioGpJKhP4ChC3+CgZ/AWAErG1MntoqRO5u6"
    "9pU6gj7JOtl+3/u+d/e965rCHAClErgQC+AmsAPnpTuBKwMb2/LuK8/Qy2AzE2/5Fwg42CeJsjXGrhdKVgC3xq43sDAchX5gTeoS"
    "4qrVfpEUDUmmPYSIjyGS7vves/ibhIQ+R1JqaK4vkNXZHaOCKWAkrpvAFKaoaHJTVDp0HN/zoINdfxRKT4MBDODgietgCV2700MS"
    "Rtd76IYtd81i6fR04/0RKUWf7qWNLoHbSaPyth/s2NiawCAkBIZeYfplQ6E8n35+P6DSuVyeZaCd8/zZCMv23OFoB46woTdmUP01"
    "Wk0qYG0PnfCEgs8VsAjWEgFbrzH06eYZ+ur/8J6F52LsQaph+vDHLZGwiLkayuBRxlUrNUO/fwUBHOAo+ceDd4fUNEIu+Tx4nJAn"
    "J/zgKu1vNiRK/+XDcGP2/ldA/dwAUfMhDFzigH2butlyB4Yu/6MaRdXqbaXTURWlrTZbzUat3qqpmqZo7U5NU7VmS2monWZk0/2j"
    "N8dVoqMaqeSo2ERnelQWLihn7wEWnR6ApQzyJIVmhostkjbxcqbIOgdyJoetkzbiYqbO11SdZABYeNpK5Qz8OQ8Y77LYtA/mM9hv"
    "Kewl/aePp5IB9wQwwzhdUxTvntlMuJcgi8x6zMXrLyFeCS769bkQv8c3WEGMMcUoP879Df/DXX0="
)


def inputs(widen=False):
    made = torch.load(io.BytesIO(zlib.decompress(base64.b64decode("".join(INPUTS)))))
    made = [t.to(DEVICE) for t in made]
    if widen:
        made = [t.double() if t.is_floating_point() else t for t in made]
    if BACKWARD:
        made = [t.detach().requires_grad_() if t.is_floating_point() else t for t in made]
    return made


def run(function, widen=False):
    args = inputs(widen)
    outputs = list(function(*args))
    results = outputs + args
    if BACKWARD:
        floating = [o for o in outputs if o.is_floating_point() and o.requires_grad]
        generator = torch.Generator().manual_seed(SEED)
        seeds = [torch.randn(o.shape, generator=generator, dtype=torch.float64).to(o.dtype) for o in floating]
        leaves = [a for a in args if a.requires_grad]
        grads = torch.autograd.grad(
            floating, leaves, [s.to(o) for s, o in zip(seeds, floating, strict=True)], allow_unused=True
        )
        results += list(grads)
    return results


def classes(x):
    return torch.where(x.isnan(), 1, torch.where(x == inf, 2, torch.where(x == -inf, 3, 0)))


def differ(a, e, r):
    """The oracle's rules (conformance/oracle.py), compactly: '' where `a` is eager's answer."""
    if a is None or e is None:
        return "" if a is None and e is None else "one side has no value"
    if a.shape != e.shape or a.dtype != e.dtype:
        return f"shape/dtype {list(a.shape)} {a.dtype}, eager's {list(e.shape)} {e.dtype}"
    a, e = a.detach().cpu(), e.detach().cpu()
    if not e.is_floating_point():
        wrong = a != e
        return f"{int(wrong.sum())} of {a.numel()} differ" if wrong.any() else ""
    a64, e64 = a.double(), e.double()
    r64 = r.detach().cpu().double() if r is not None and r.shape == a.shape else None
    odd = classes(a64) != classes(e64)
    if odd.any() and (r64 is None or (odd & (classes(a64) != classes(r64.to(a.dtype).double()))).any()):
        return f"nan/inf at {int(odd.sum())} of {a.numel()} elements differ from eager's"
    finite = (classes(a64) == 0) & (classes(e64) == 0)
    far = finite & ((a64 - e64).abs() > ATOL + RTOL * e64.abs())
    if not far.any():
        return ""
    if r64 is not None:
        both = finite & r64.isfinite()
        if both.any() and (a64 - r64).abs()[both].max() <= 2 * (e64 - r64).abs()[both].max() + ATOL:
            return ""
    worst = int(torch.where(far, (a64 - e64).abs(), -1.0).reshape(-1).argmax())
    return (
        f"{int(far.sum())} of {a.numel()} elements beyond tolerance; at flat index {worst}: "
        f"{BACKEND} {a.reshape(-1)[worst].item()!r}, eager {e.reshape(-1)[worst].item()!r}"
    )


def main():
    print(PROGRAM_SOURCE)
    expected = run(program)
    try:
        reference = run(program, widen=True)
    except Exception:
        reference = [None] * len(expected)
    try:
        actual = run(torch.compile(program, backend=BACKEND, dynamic=False))
    except Exception as error:  # the fuzzer's "the compiled program raised ..."
        print(f"the compiled program raised {type(error).__name__}: {str(error)[:2000]}")
        sys.exit(1)
    problems = [
        f"result {i}: {message}"
        for i, (a, e, r) in enumerate(zip(actual, expected, reference, strict=True))
        if (message := differ(a, e, r))
    ]
    print("\n".join(problems) or "no difference: eager and the backend agree (fixed?)")
    sys.exit(1 if problems else 0)


PROGRAM_SOURCE = "def program(v0):\n    v1 = torch.ops.aten.add.Tensor(v0, v0)\n    v2 = torch.ops.aten.max.dim(v1, dim=-1, keepdim=False)[0]\n    return (v2,)\n"

if __name__ == "__main__":
    main()
