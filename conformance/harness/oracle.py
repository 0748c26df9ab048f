"""The oracle: is a compiled result eager's answer?

One function, `compare(actual, expected, reference, tolerance)`, used for outputs, for inputs after
the call and for gradients:

1. Structure, shape, dtype and device must match exactly (tuples element by element).
2. Integers and bools must be equal.
3. Floats: nan positions and the signs of infinities must match eager's. Where they differ, the
   float64 reference rounded to the dtype decides (eager's CPU kernels are not always right about
   overflow: a vectorized fmod is nan where the quotient overflows). A finite value where eager has nan
   or inf must then be the reference's within the *allowed error*: the tolerance of rule 4, or K times
   what rounding in the working dtype alone can move the reference there (the reference perturbed,
   `conformance.harness.perturbation`; a gradient computed from a rounded result carries that rounding).
   Where the reference's class does not decide either:
   a. where eager's nan or inf is not the reference's class, eager has no answer to hold the result to:
      a nan or an infinity is as good as eager's, but not an infinity of the sign opposite the reference's;
   b. an infinity is a rounding of the reference where the reference is within the allowed error of the
      dtype's overflow threshold (max plus half an ulp), on that side; a finite value where the reference
      is within it below the threshold (and the value is held to the reference as above);
   c. where rounding alone changes the reference's sign or class (tan of acos(0) in float16), the working
      dtype has no one answer: the element is not compared.
4. Finite floats must be within the dtype's tolerance of eager's — torch.testing.assert_close's
   defaults (`|a - e| <= atol + rtol * |e|`) unless the spec overrides them with a reason.
5. Signed zeros (forward results and inputs after the call, not gradients): where eager's result is a
   zero and the float64 reference rounded to the dtype is a zero of the same sign, eager's sign is
   IEEE's answer and the compiled zero must have it (neg(+0.0) is -0.0; 1/x then tells them apart).
   Where the reference is not a zero of that sign, eager's sign is an accident of rounding: not checked.
6. Precision (float32 and float64 forward results): the error against the float64 reference, in ulps of
   the result's largest magnitude (`ulps_of_scale`; at the scale, not per element, because a result
   that cancels to near zero has huge per-element ulps in eager too), may not exceed the op's budget
   or twice eager's, whichever is larger. The absolute tolerance of rule 4 hides a formula that lost
   four digits on values near 1 (an error of 1e-5 there is 84 ulps); this does not. The run records
   each case's largest ulps, backend's and eager's, for the precision report.
7. Failing rule 4, the compiled result may be no further from the float64 reference than eager is:
   `max|a - r| <= K * max|e - r| + atol`, the maximum (infinity norm) taken over the elements finite in
   all three, with K = 2. A result computed in more precision than eager's (the fuser keeps half
   values in float32) passes here; a wrong lowering does not. Nor does it fail a program that amplifies
   a rounding error where eager happens to be closer: each element beyond rule 4 may also be within K
   times what rounding alone can move the reference there (+ atol). A lowering a few ulps off is still
   caught, amplified alike.

Strides are not part of the verdict, but where a dense result's strides differ from eager's the
verdict carries a note saying so.

Where eager itself has no one answer — a spec's `unspecified_at` names input values at which eager's
vectorized and scalar loops disagree — the runner passes a mask of those positions (`unspecified`),
and only those elements are left out of every step above; all others are compared as always.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from conformance.harness.policy import TOLERANCES, ULP_DTYPES, ULP_K, K  # the policy; this module applies it

# Input values a spec may name in `unspecified_at`, and how to find them in a float64 tensor.
UNSPECIFIED_VALUES = {
    "nan": torch.isnan,
    "-0.0": lambda x: (x == 0) & x.signbit(),
    "inf": torch.isposinf,
    "-inf": torch.isneginf,
}


@dataclass
class Verdict:
    ok: bool = True
    message: str = ""
    notes: list[str] = field(default_factory=list)
    forward: bool = True  # rules 5 and 6 apply to forward results only
    signed_zeros: bool = False  # rule 5, where the program makes zero signs defined
    ulp_budget: float | None = None  # rule 6's budget; None: ulps recorded, not judged
    ulps: tuple[float, float] = (0.0, 0.0)  # the largest (backend, eager) ulps of scale seen (rule 6)

    def fail(self, message: str) -> Verdict:
        self.ok = False
        self.message = message
        return self


def compare(
    actual,
    expected,
    reference=None,
    tolerance: tuple[float, float] | None = None,
    unspecified=None,
    forward: bool = True,
    ulp_budget: float | None = None,
    signed_zeros: bool = False,
    perturbed: Callable[[], list] | None = None,
) -> Verdict:
    """`unspecified`: None, or a bool tensor per tensor of `expected` (same structure, None where
    nothing is), True where eager has no one answer: those elements are not compared. `forward`:
    whether zero signs and ulps are checked (rules 5 and 6); gradients are compared without them.
    `ulp_budget`: rule 6's budget (None: the ulps are recorded but not judged — the runner judges op
    cases, where a budget means something; a whole program's sums cancel). `signed_zeros`: whether rule 5
    applies — only where the op's zero signs are IEEE's (the runner says so per spec and context).
    `perturbed`: None, or a function returning the float64 reference computed again under perturbations
    by the working dtype's rounding (`conformance.harness.perturbation.perturbed`: a list of results of
    `reference`'s structure), called only where rules 3, 4 and 7 would fail without it."""
    verdict = Verdict(forward=forward, ulp_budget=ulp_budget, signed_zeros=signed_zeros)
    _compare(
        actual, expected, reference, tolerance, verdict, "result", unspecified, perturbed or (lambda: [])
    )
    return verdict


def _compare(
    actual,
    expected,
    reference,
    tolerance,
    verdict: Verdict,
    path: str,
    unspecified=None,
    perturbed: Callable[[], list] = lambda: [],
) -> None:
    if not verdict.ok:
        return
    if isinstance(expected, torch.Tensor):
        if not isinstance(actual, torch.Tensor):
            verdict.fail(f"{path}: expected a tensor, got {type(actual).__name__}")
            return
        ref = reference if isinstance(reference, torch.Tensor) else None
        mask = unspecified if isinstance(unspecified, torch.Tensor) else None
        message = compare_tensors(
            actual, expected, ref, tolerance, verdict.notes, path, mask, verdict, perturbed
        )
        if message:
            verdict.fail(message)
        return
    if isinstance(expected, tuple | list):
        if not isinstance(actual, tuple | list) or len(actual) != len(expected):
            verdict.fail(f"{path}: expected {len(expected)} values, got {_summary(actual)}")
            return
        references = (
            reference if isinstance(reference, tuple | list) and len(reference) == len(expected) else None
        )
        masks = unspecified if isinstance(unspecified, tuple | list) else [None] * len(expected)
        for i, (a, e) in enumerate(zip(actual, expected, strict=True)):
            reference_i = references[i] if references else None
            _compare(a, e, reference_i, tolerance, verdict, f"{path}[{i}]", masks[i], _item(perturbed, i))
        return
    if actual != expected and not (_is_nan(actual) and _is_nan(expected)):
        verdict.fail(f"{path}: expected {expected!r}, got {actual!r}")


def _item(perturbed: Callable[[], list], index: int) -> Callable[[], list]:
    """The perturbed references of the `index`th value of a tuple or list, still lazily."""

    def runs() -> list:
        return [
            run[index] if isinstance(run, tuple | list) and len(run) > index else None for run in perturbed()
        ]

    return runs


def _is_nan(value) -> bool:
    return isinstance(value, float) and value != value


def _summary(value) -> str:
    if isinstance(value, tuple | list):
        return f"{len(value)} values"
    return type(value).__name__


def compare_tensors(
    actual: torch.Tensor,
    expected: torch.Tensor,
    reference: torch.Tensor | None,
    tolerance: tuple[float, float] | None,
    notes: list[str],
    path: str,
    unspecified: torch.Tensor | None = None,
    verdict: Verdict | None = None,
    perturbed: Callable[[], list] | None = None,
) -> str:
    """'' when `actual` is eager's answer, else one line saying how it is not. `verdict` (optional):
    whether rules 5 and 6 apply, the ulp budget, and where the ulps seen are recorded."""
    verdict = verdict or Verdict()
    if actual.shape != expected.shape:
        return f"{path}: shape {list(actual.shape)}, eager's is {list(expected.shape)}"
    if actual.dtype != expected.dtype:
        return f"{path}: dtype {actual.dtype}, eager's is {expected.dtype}"
    if actual.device.type != expected.device.type:
        return f"{path}: device {actual.device}, eager's is {expected.device}"
    if actual.numel() > 1 and actual.stride() != expected.stride():
        notes.append(f"{path}: strides {actual.stride()}, eager's {expected.stride()}")
    if actual.numel() == 0:
        return ""
    a, e = actual.detach().cpu(), expected.detach().cpu()
    if unspecified is not None:  # eager has no one answer there: the same 0 on every side, never compared
        if unspecified.shape != a.shape:
            raise ValueError(
                f"{path}: unspecified mask of shape {list(unspecified.shape)}, result's {list(a.shape)}"
            )
        a, e = a.masked_fill(unspecified, 0), e.masked_fill(unspecified, 0)
        if reference is not None and reference.shape == a.shape:
            reference = reference.detach().cpu().masked_fill(unspecified, 0)
    if not expected.dtype.is_floating_point:
        wrong = a != e
        if not wrong.any():
            return ""
        return f"{path}: {_count(wrong)} differ; " + _first(wrong, a, e, None)
    if _same_bits(a, e):
        # Eager's own answer, bit for bit: rules 3 to 5 hold, and rule 6 too (its ulps are eager's, within
        # twice eager's); only the ulps are recorded. Most results and every untouched input after the
        # call are this, and the elementwise rules cost a fifth of a validation's time (docs/validation.md).
        if verdict.forward and reference is not None and reference.shape == a.shape and a.dtype in ULP_DTYPES:
            eager = ulps_of_scale(e, reference.detach().cpu(), a.dtype)
            verdict.ulps = (max(verdict.ulps[0], eager), max(verdict.ulps[1], eager))
        return ""
    tolerance = tolerance or TOLERANCES[expected.dtype]
    rounding = _Rounding(perturbed, reference, unspecified)
    message = _compare_floats(a, e, reference, tolerance, path, rounding)
    if message or not verdict.forward or reference is None or reference.shape != a.shape:
        return message
    signs = _zero_signs(a, e, reference, path) if verdict.signed_zeros else ""
    return signs or _precision(a, e, reference, path, verdict)


def _same_bits(a: torch.Tensor, e: torch.Tensor) -> bool:
    """Whether two floating tensors of one dtype and shape hold the same bits everywhere (nan payloads
    and zero signs included), whatever their strides."""
    bits = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}.get(a.element_size())
    return bits is not None and torch.equal(a.view(bits), e.view(bits))


def ulps_of_scale(x: torch.Tensor, reference: torch.Tensor, dtype: torch.dtype) -> float:
    """max|x - reference| in units in the last place (of `dtype`) of max|reference|, over the elements
    finite in both."""
    x64, r64 = x.to(torch.float64), reference.to(torch.float64)
    finite = x64.isfinite() & r64.isfinite()
    if not finite.any():
        return 0.0
    error = (x64 - r64).abs()[finite].max().item()
    scale = r64.abs()[finite].max().item()
    info = torch.finfo(dtype)
    # The ulp of `scale` is eps times the power of two at or below it (eps: the ulp of 1.0); below the
    # smallest normal it is the subnormals' spacing. Scaled by exponent, so huge values cannot overflow.
    if scale < info.tiny:
        return error / (info.eps * info.tiny)
    _, exponent = math.frexp(scale)  # scale = m * 2**exponent, 0.5 <= m < 1
    return math.ldexp(error, 1 - exponent) / info.eps


def _precision(a, e, reference, path: str, verdict: Verdict) -> str:
    """Rule 6: '' unless the result is further from float64, in ulps of its scale, than allowed."""
    if a.dtype not in ULP_DTYPES:
        return ""
    r = reference.detach().cpu()
    mine, eager = ulps_of_scale(a, r, a.dtype), ulps_of_scale(e, r, a.dtype)
    verdict.ulps = (max(verdict.ulps[0], mine), max(verdict.ulps[1], eager))
    if verdict.ulp_budget is None:
        return ""
    allowed = max(verdict.ulp_budget, ULP_K * eager)
    if mine <= allowed:
        return ""
    return (
        f"{path}: {mine:.1f} ulps of the result's scale from float64, eager {eager:.1f} "
        f"(allowed {allowed:.1f}: the op's budget {verdict.ulp_budget:g} or {ULP_K:g} x eager's)"
    )


def _zero_signs(a, e, reference, path: str) -> str:
    """Rule 5: '' unless a zero's sign differs from eager's where float64 gives eager's sign too."""
    if reference is None or reference.shape != a.shape:
        return ""
    a64, e64 = a.to(torch.float64), e.to(torch.float64)
    flipped = (a64 == 0) & (e64 == 0) & (a64.signbit() != e64.signbit())
    if not flipped.any():
        return ""
    r = reference.detach().cpu().to(a.dtype).to(torch.float64)
    defined = flipped & (r == 0) & (r.signbit() == e64.signbit())
    if not defined.any():
        return ""
    return f"{path}: {_count(defined)} zeros of the other sign than eager's and float64's; " + _first(
        defined, a64, e64, r
    )


class _Rounding:
    """What rounding in the working dtype alone can do to the reference, per element, from the perturbed
    references (`conformance.harness.perturbation`), computed on first use. `spread`: the largest distance of a
    perturbed reference from the reference (inf where one is not finite); `undetermined`: where the
    perturbed references do not share the reference's class and sign (the working dtype has no one
    answer there). Without perturbed references: no spread, nothing undetermined."""

    def __init__(self, perturbed: Callable[[], list] | None, reference, unspecified):
        self.perturbed, self.reference, self.unspecified = perturbed, reference, unspecified
        self._found: tuple[torch.Tensor, torch.Tensor] | None = None

    def spread(self) -> torch.Tensor:
        return self._load()[0]

    def undetermined(self) -> torch.Tensor:
        return self._load()[1]

    def _load(self) -> tuple[torch.Tensor, torch.Tensor]:
        if self._found is not None:
            return self._found
        r64 = self.reference.detach().cpu().to(torch.float64)
        spread, undetermined = torch.zeros_like(r64), torch.zeros(r64.shape, dtype=torch.bool)
        runs = self.perturbed() if self.perturbed is not None else []
        for run in runs:
            if not isinstance(run, torch.Tensor) or run.shape != r64.shape:
                continue
            p64 = run.detach().cpu().to(torch.float64)
            undetermined |= (_classes(p64) != _classes(r64)) | (p64.sign() != r64.sign())
            spread = torch.maximum(spread, (p64 - r64).abs().nan_to_num(float("inf"), float("inf")))
        if self.unspecified is not None:
            spread, undetermined = spread.masked_fill(self.unspecified, 0), undetermined & ~self.unspecified
        self._found = spread.nan_to_num(0.0), undetermined
        return self._found


def _overflow_threshold(dtype: torch.dtype) -> float:
    """The magnitude from which a value rounds to infinity in `dtype`: its max plus half an ulp of it
    (float64's is inf; computed as 2.0 ** 1024 it would raise)."""
    info = torch.finfo(dtype)
    # max = m * 2**exponent with 0.5 <= m < 1, so its ulp is eps * 2**(exponent - 1)
    _, exponent = math.frexp(info.max)
    return info.max + math.ldexp(info.eps / 2, exponent - 1)


def _compare_floats(a, e, reference, tolerance, path: str, rounding: _Rounding | None = None) -> str:
    rtol, atol = tolerance
    a64, e64 = a.to(torch.float64), e.to(torch.float64)
    r64 = None
    if reference is not None and reference.shape == a.shape:
        r64 = reference.detach().cpu().to(torch.float64)
    rounding = rounding or _Rounding(None, r64, None)

    def allowed() -> torch.Tensor:
        """Rule 3's error allowed against the reference: the tolerance, or K times what rounding in the
        working dtype alone can do there (a program that amplifies a rounding error)."""
        return torch.maximum(atol + rtol * r64.abs(), K * rounding.spread())

    # Classes: nan, +inf, -inf, finite. A class differing from eager's may match the reference's.
    a_class, e_class = _classes(a64), _classes(e64)
    differ = a_class != e_class
    if differ.any():
        if r64 is None:
            return f"{path}: nan/inf at {_count(differ)} differ from eager's; " + _first(
                differ, a64, e64, None
            )
        r_class = _classes(r64.to(a.dtype).to(torch.float64))
        unexplained = differ & (a_class != r_class)
        if unexplained.any():
            unexplained &= ~_eager_lost_it(a_class, e_class, r_class, r64)
        if unexplained.any():
            unexplained &= ~_within_rounding(a_class, r64, allowed(), a.dtype) & ~rounding.undetermined()
        if unexplained.any():
            return (
                f"{path}: nan/inf at {_count(unexplained)} differ from eager's and the float64 reference's; "
                + _first(unexplained, a64, e64, r64)
            )
        # A finite value where eager has nan or inf must then be the reference's, within what is allowed.
        off = differ & (a_class == 0) & r64.isfinite() & ((a64 - r64).abs() > atol + rtol * r64.abs())
        if off.any():
            off &= ((a64 - r64).abs() > allowed()) & ~rounding.undetermined()
        if off.any():
            return (
                f"{path}: {_count(off)} finite where eager's are not, and not the float64 reference's; "
                + _first(off, a64, e64, r64)
            )
    finite = (a_class == 0) & (e_class == 0)
    close = (a64 - e64).abs() <= atol + rtol * e64.abs()
    far = finite & ~close
    if not far.any():
        return ""
    where = f"{_count(far)} beyond rtol={rtol:g}, atol={atol:g}"
    if r64 is None:
        return f"{path}: {where} (no float64 reference); " + _first(far, a64, e64, None)
    comparable = finite & r64.isfinite()
    if not comparable.any():
        return f"{path}: {where}; " + _first(far, a64, e64, r64)
    actual_error = (a64 - r64).abs()[comparable].max().item()
    eager_error = (e64 - r64).abs()[comparable].max().item()
    if actual_error <= K * eager_error + atol:
        return ""
    # Rule 7, amplified: each element far from eager is within K times what rounding alone can do there.
    amplified = (
        far & comparable & ((a64 - r64).abs() > K * rounding.spread() + atol) & ~rounding.undetermined()
    )
    if not amplified.any():
        return ""
    return (
        f"{path}: {where}, and further from float64 than eager is: max error {actual_error:.3g} > "
        f"{K:g} x eager's {eager_error:.3g} + atol, and than rounding in the working dtype can move it; "
        + _first(far, a64, e64, r64)
    )


def _eager_lost_it(a_class, e_class, r_class, r64) -> torch.Tensor:
    """Rule 3a: where eager's nan or inf is not the reference's class either, eager has no answer to
    hold the compiled result to: a nan or inf of its own is as good, unless an infinity of the sign
    opposite the reference's."""
    wrong_sign = ((a_class == 2) & (r64 < 0)) | ((a_class == 3) & (r64 > 0))
    return (e_class != 0) & (e_class != r_class) & (a_class != 0) & ~wrong_sign


def _within_rounding(a_class, r64, allowed, dtype) -> torch.Tensor:
    """Rule 3b: where the compiled class is that of some value within the allowed error of the
    reference, rounded to the dtype: an infinity where the reference is that near the overflow
    threshold, a finite value where the reference is that near below it (the finite value itself is
    then held to the reference)."""
    threshold = _overflow_threshold(dtype)
    return (
        ((a_class == 2) & (r64 + allowed >= threshold))
        | ((a_class == 3) & (r64 - allowed <= -threshold))
        | ((a_class == 0) & r64.isfinite() & (r64.abs() - allowed < threshold))
    )


def _classes(x: torch.Tensor) -> torch.Tensor:
    """0 finite, 1 nan, 2 +inf, 3 -inf."""
    out = torch.zeros(x.shape, dtype=torch.int8)
    out[x.isnan()] = 1
    out[x == float("inf")] = 2
    out[x == float("-inf")] = 3
    return out


def _count(mask: torch.Tensor) -> str:
    return f"{int(mask.sum())} of {mask.numel()} elements"


def _first(mask: torch.Tensor, a, e, r) -> str:
    """The worst (or first) offending element, with every answer at it."""
    if a.dtype.is_floating_point:
        gap = torch.where(
            mask, (a.to(torch.float64) - e.to(torch.float64)).abs().nan_to_num(float("inf")), -1.0
        )
        flat = int(gap.reshape(-1).argmax())
    else:
        flat = int(mask.reshape(-1).nonzero()[0])
    index = tuple(int(i) for i in torch.unravel_index(torch.tensor(flat), mask.shape)) if mask.dim() else ()
    text = f"at {list(index)}: compiled {a[index].item()!r}, eager {e[index].item()!r}"
    if r is not None:
        text += f", float64 reference {r[index].item()!r}"
    return text
