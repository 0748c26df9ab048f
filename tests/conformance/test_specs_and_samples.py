"""Op specs are checked when made, and samples are seeded and cover the shapes, layouts and values
the suite promises."""

from __future__ import annotations

import math

import pytest
import torch

from conformance.harness.runner import supported_dtypes
from conformance.plugin import untested_ops
from conformance.specs import SpecError, spec
from conformance.specs.catalog import SPECS, overload_counts
from conformance.specs.samples import generate, iter_samples
from conformance.specs.values import lay_out, values_for


def _unspecified(where: dict, reason: str = "eager's loops disagree") -> dict:
    return {
        "family": "elementwise",
        "category": "pointwise",
        "unspecified_at": where,
        "unspecified_reason": reason,
    }


@pytest.mark.parametrize(
    ("fields", "complaint"),
    [
        ({"family": "elementwise", "category": "pointwise", "dtype": ("float32",)}, "unknown field"),
        ({"family": "elementwise", "category": "pointwise", "dtypes": ("float17",)}, "unknown dtype"),
        ({"family": "elementwise", "category": "pointwise", "variants": ({"alpah": 2},)}, "alpah"),
        ({"family": "pointwise", "category": "pointwise"}, "family"),
        (
            {"family": "elementwise", "category": "pointwise", "tolerance": {"float16": (1e-2, 1e-3)}},
            "reason",
        ),
        (_unspecified({"fwd": {"self": ("NaN",)}}), "unspecified_at value.*NaN"),
        (_unspecified({"fwd": {"self": ("nan",)}}, reason=" "), "needs unspecified_reason"),
        (_unspecified({"fwd": {"slef": ("nan",)}}), "slef"),
        (_unspecified({"backward": {"self": ("nan",)}}), "direction 'backward'"),
        (_unspecified({"bwd": {"self": ("nan",)}}), "not differentiable"),
        (_unspecified({"fwd": {"self": "nan"}}), "tuple of values"),
        ({"family": "elementwise", "category": "pointwise", "unspecified_reason": "why"}, "without"),
        ({"family": "elementwise", "category": "pointwise", "not_differentiated": ("tagret",)}, "tagret"),
        ({"family": "elementwise", "category": "pointwise", "combine": "mixed"}, "not a function"),
    ],
)
def test_a_malformed_spec_is_an_error_naming_the_problem(fields, complaint):
    with pytest.raises(SpecError, match=complaint):
        spec("aten.add.Tensor", **fields)


def test_an_op_that_does_not_exist_is_an_error():
    with pytest.raises(SpecError, match="not an operator overload"):
        spec("aten.add.Tensr", family="elementwise", category="pointwise")


def test_the_suite_covers_at_least_420_aten_overloads_300_of_them_not_in_place_twins():
    counts = overload_counts()
    assert counts["overloads"] == len(SPECS) >= 420
    assert counts["not_inplace"] >= 300
    assert counts["not_inplace"] + counts["inplace_twins"] == counts["overloads"]


def test_every_op_the_fuser_lowers_pointwise_has_a_spec():
    from fuser.lower.ops import POINTWISE_BY_OVERLOAD

    missing = [str(o) for o in POINTWISE_BY_OVERLOAD if str(o) not in SPECS]
    assert not missing


def test_samples_are_the_same_on_every_draw():
    first = generate(SPECS["aten.add.Tensor"], "float16", "quick")
    second = generate(SPECS["aten.add.Tensor"], "float16", "quick")
    for a, b in zip(first, second, strict=True):
        for x, y in zip(a.tensors(), b.tensors(), strict=True):
            assert torch.equal(x.nan_to_num(), y.nan_to_num()) and x.stride() == y.stride()


def test_elementwise_samples_cover_zero_size_broadcasts_layouts_and_awkward_values():
    samples = generate(SPECS["aten.add.Tensor"], "float32", "quick")
    shapes = {tuple(t.shape) for s in samples for t in s.tensors()}
    assert {(), (0, 7), (4, 0), (37, 7), (5, 1, 3), (3,)} <= shapes
    strides = {t.stride() for s in samples for t in s.tensors() if t.shape == (37, 7)}
    assert {(7, 1), (14, 2), (1, 37), (0, 1)} <= strides  # contiguous, gapped, transposed, expanded
    assert any(t.storage_offset() for s in samples for t in s.tensors())
    walk = samples[0].tensors()[0]
    for value in (math.inf, -math.inf, torch.finfo(torch.float32).max, torch.finfo(torch.float32).tiny):
        assert (walk == value).any()
    assert walk.isnan().any() and (walk == 0).any() and torch.signbit(walk[walk == 0]).any()


def test_gaps_of_a_noncontiguous_sample_hold_nan_so_an_out_of_bounds_read_shows():
    values = values_for((4, 3), torch.float32, position=0, seed=1, specials=False)
    view = lay_out(values, "noncontiguous")
    assert torch.equal(view, values) and view.stride() == (6, 2)
    whole = torch.empty(0).set_(view.untyped_storage())
    assert whole.isnan().sum() == 12


def test_integer_samples_hold_the_dtype_limits():
    walk = generate(SPECS["aten.add.Tensor"], "int8", "quick")[0].tensors()[0]
    assert (walk == 127).any() and (walk == -128).any()


def test_an_op_eager_rejects_in_every_dtype_is_reported_not_silently_dead():
    dtypes = {"aten.good.default": ("float32",), "aten.dead.default": ()}
    assert untested_ops(list(dtypes), dtypes.__getitem__) == ["aten.dead.default"]


def test_every_reduction_spec_gets_samples_eager_accepts():
    # argmax's `dim` is `int?`: it was once sampled as a list, which eager rejects, so it tested nothing.
    for op in ("aten.argmax.default", "aten.argmin.default", "aten.sum.dim_IntList", "aten.max.dim"):
        assert "float32" in supported_dtypes(SPECS[op], "cpu"), op


def test_an_optional_dim_reduction_is_also_sampled_over_every_dim():
    samples = list(iter_samples(SPECS["aten.sum.dim_IntList"], "float32", "quick"))
    assert any(sample.kwargs.get("dim", "absent") is None for sample in samples)
