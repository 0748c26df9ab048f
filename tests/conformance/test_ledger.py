"""The ledger of expected failures: every field validated, errors that say where, and scope matching."""

from __future__ import annotations

from pathlib import Path

import pytest

from conformance.harness.ledger import DEFAULT_PATH, Ledger, LedgerError
from conformance.specs.caseid import CaseKey

ENTRY = """
[[xfail]]
op = "aten.nextafter.default"
backend = "inductor"
device = "cpu"
dtype = ["bfloat16", "float16"]
direction = "fwd"
reason = "Inductor rounds through float32"
"""


def key(
    op="aten.nextafter.default",
    dtype="float16",
    context="alone",
    direction="fwd",
    backend="inductor",
    device="cpu",
):
    return CaseKey(op, dtype, context, direction, backend, device)


def ledger_file(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "expected_failures.toml"
    path.write_text(text)
    return path


def load(tmp_path: Path, text: str, **kwargs) -> Ledger:
    return Ledger.load(ledger_file(tmp_path, text), **kwargs)


def error_of(tmp_path: Path, text: str, **kwargs) -> str:
    with pytest.raises(LedgerError) as raised:
        load(tmp_path, text, **kwargs)
    return str(raised.value)


def test_the_shipped_ledger_is_valid_and_is_the_default():
    ledger = Ledger.load()
    assert ledger.path == DEFAULT_PATH
    assert DEFAULT_PATH.name == "expected_failures.toml" and DEFAULT_PATH.parent.name == "conformance"


def test_a_file_with_no_entries_is_an_empty_ledger(tmp_path):
    assert load(tmp_path, "# nothing expected to fail\n").entries == ()
    assert load(tmp_path, "xfail = []\n").entries == ()


def test_an_entry_reads_each_scope_as_a_tuple_and_context_defaults_to_any(tmp_path):
    (entry,) = load(tmp_path, ENTRY).entries
    assert entry.op == "aten.nextafter.default"
    assert entry.backends == ("inductor",)
    assert entry.devices == ("cpu",)
    assert entry.dtypes == ("bfloat16", "float16")
    assert entry.directions == ("fwd",)
    assert entry.contexts == ("*",)
    assert entry.reason == "Inductor rounds through float32"


def test_an_unknown_field_is_an_error_naming_the_field_the_file_the_entry_and_the_op(tmp_path):
    message = error_of(tmp_path, ENTRY + ENTRY.replace("aten.nextafter", "aten.atan2") + 'reasn = "typo"\n')
    assert str(tmp_path / "expected_failures.toml") in message
    assert "xfail entry 1 (op 'aten.atan2.default')" in message
    assert "unknown field(s) 'reasn'" in message
    assert "entry 0" not in message


@pytest.mark.parametrize(
    ("field", "value", "bad"),
    [
        ("dtype", '["float16", "bfloat17"]', "'bfloat17'"),
        ("dtype", '"half"', "'half'"),
        ("device", '"tpu"', "'tpu'"),
        ("direction", '"backward"', "'backward'"),
        ("context", '"fused"', "'fused'"),
        ("backend", '"inducter"', "'inducter'"),
    ],
)
def test_a_name_outside_a_fields_vocabulary_is_an_error_naming_field_and_value(tmp_path, field, value, bad):
    text = ENTRY.replace('direction = "fwd"', 'direction = "fwd"\ncontext = "*"')
    text = "\n".join(
        f"{field} = {value}" if line.startswith(f"{field} =") else line for line in text.splitlines()
    )
    message = error_of(tmp_path, text)
    assert f"xfail entry 0 (op 'aten.nextafter.default'): {field}: {bad} is not '*' or one of" in message


def test_a_backend_given_as_module_and_callable_is_accepted(tmp_path):
    (entry,) = load(
        tmp_path, ENTRY.replace('backend = "inductor"', 'backend = ["my.backends:fast", "fuser"]')
    ).entries
    assert entry.backends == ("my.backends:fast", "fuser")


def test_a_missing_reason_is_an_error(tmp_path):
    message = error_of(tmp_path, ENTRY.replace('reason = "Inductor rounds through float32"', ""))
    assert "xfail entry 0 (op 'aten.nextafter.default'): 'reason' is a required property" in message


def test_a_blank_reason_is_an_error(tmp_path):
    message = error_of(tmp_path, ENTRY.replace('"Inductor rounds through float32"', '"   "'))
    assert "reason is empty" in message


def test_a_scope_left_out_is_an_error_since_any_must_be_written(tmp_path):
    message = error_of(tmp_path, ENTRY.replace('device = "cpu"\n', ""))
    assert "'device' is a required property" in message


def test_a_star_inside_a_list_is_an_error(tmp_path):
    message = error_of(tmp_path, ENTRY.replace('["bfloat16", "float16"]', '["*", "float16"]'))
    assert "dtype: '*' means any: write it alone" in message


def test_an_op_that_is_not_an_overload_name_is_an_error(tmp_path):
    message = error_of(tmp_path, ENTRY.replace('"aten.nextafter.default"', '"aten.nextafter"'))
    assert "'aten.nextafter' is not an overload name" in message


def test_every_bad_entry_is_reported_at_once(tmp_path):
    bad = ENTRY.replace('"fwd"', '"sideways"')
    message = error_of(tmp_path, bad + ENTRY + bad)
    assert "xfail entry 0 " in message and "xfail entry 2 " in message
    assert "xfail entry 1 " not in message


def test_a_file_that_is_not_toml_or_holds_other_tables_is_an_error_naming_the_file(tmp_path):
    assert str(tmp_path) in error_of(tmp_path, "[[xfail]\nop = ")
    assert "'xfails' was unexpected" in error_of(tmp_path, ENTRY.replace("[[xfail]]", "[[xfails]]"))


def test_a_ledger_error_is_a_value_error():
    assert issubclass(LedgerError, ValueError)


def test_an_op_missing_from_the_known_ops_is_an_error_with_a_suggestion(tmp_path):
    known = {"aten.nextafter.default", "aten.add.Tensor"}
    assert len(load(tmp_path, ENTRY, known_ops=known).entries) == 1
    message = error_of(tmp_path, ENTRY.replace("nextafter", "nexafter"), known_ops=known)
    assert "unknown op 'aten.nexafter.default' (a typo would silently disable nothing: fix it)" in message
    assert "did you mean 'aten.nextafter.default'?" in message


def test_star_scopes_match_any_case_of_the_op_and_only_that_op(tmp_path):
    text = ENTRY
    for field in ("backend", "device", "dtype", "direction"):
        text = "\n".join(
            f'{field} = "*"' if line.startswith(f"{field} =") else line for line in text.splitlines()
        )
    ledger = load(tmp_path, text)
    for case in (
        key(),
        key(dtype="int8", context="from_reduction", direction="bwd", backend="a.b:c", device="cuda"),
    ):
        assert ledger.match(case) is ledger.entries[0]
    assert ledger.match(key(op="aten.add.Tensor")) is None


def test_list_scopes_match_each_name_listed_and_no_other(tmp_path):
    ledger = load(tmp_path, ENTRY + 'context = ["alone", "producer"]\n')
    (entry,) = ledger.entries
    assert entry.matches(key(dtype="bfloat16")) and entry.matches(key(dtype="float16", context="producer"))
    assert not entry.matches(key(dtype="float32"))
    assert not entry.matches(key(context="consumer"))
    assert not entry.matches(key(direction="bwd"))
    assert not entry.matches(key(backend="fuser"))
    assert not entry.matches(key(device="cuda"))


def test_the_first_matching_entry_wins(tmp_path):
    second = ENTRY.replace("Inductor rounds through float32", "second").replace(
        '["bfloat16", "float16"]', '"*"'
    )
    ledger = load(tmp_path, ENTRY + second)
    assert ledger.match(key(dtype="float16")).reason == "Inductor rounds through float32"
    assert ledger.match(key(dtype="float32")).reason == "second"


def test_unused_finds_an_entry_that_matches_no_case_of_the_run(tmp_path):
    dead = ENTRY.replace("aten.nextafter.default", "aten.atan2.default")
    ledger = load(tmp_path, ENTRY + dead)
    run = [key(dtype=dtype) for dtype in ("float16", "float32")]
    assert [entry.op for entry in ledger.unused(run, "inductor", "cpu")] == ["aten.atan2.default"]


def test_unused_ignores_entries_scoped_to_another_backend_or_device(tmp_path):
    other_backend = ENTRY.replace('backend = "inductor"', 'backend = "fuser"')
    other_device = ENTRY.replace('device = "cpu"', 'device = "cuda"')
    ledger = load(tmp_path, other_backend + other_device)
    assert ledger.unused([], "inductor", "cpu") == []
    assert len(ledger.unused([], "fuser", "cpu")) == 1


def test_an_entry_shadowed_by_an_earlier_one_is_unused(tmp_path):
    ledger = load(tmp_path, ENTRY + ENTRY.replace("Inductor rounds through float32", "shadowed"))
    run = [key(dtype="float16"), key(dtype="bfloat16")]
    assert [entry.reason for entry in ledger.unused(run, "inductor", "cpu")] == ["shadowed"]


def test_a_tier_scope_expects_the_failure_only_on_that_tiers_samples(tmp_path):
    ledger = load(tmp_path, ENTRY + 'tier = "full"\n')
    case = key(dtype="float16")
    assert ledger.match(case, "full") is ledger.entries[0]
    assert ledger.match(case, "quick") is None  # the quick tier's samples pass: no strict xfail there
    assert ledger.unused([case], "inductor", "cpu") == []


def test_an_entry_without_a_tier_applies_to_every_tier(tmp_path):
    ledger = load(tmp_path, ENTRY)
    for tier in ("quick", "full"):
        assert ledger.match(key(dtype="float16"), tier) is ledger.entries[0]


def test_an_unknown_tier_is_named(tmp_path):
    message = error_of(tmp_path, ENTRY + 'tier = "nightly"\n')
    assert "tier: 'nightly' is not '*' or one of quick, full" in message


def test_a_later_entry_for_another_tier_is_not_shadowed(tmp_path):
    quick = ENTRY + 'tier = "quick"\n'
    full = ENTRY.replace("Inductor rounds through float32", "full only") + 'tier = "full"\n'
    ledger = load(tmp_path, quick + full)
    assert ledger.match(key(dtype="float16"), "full").reason == "full only"
    assert ledger.unused([key(dtype="float16"), key(dtype="bfloat16")], "inductor", "cpu") == []


def test_fails_with_is_read_and_a_pattern_that_does_not_compile_is_an_error(tmp_path):
    (entry,) = load(tmp_path, ENTRY + 'fails_with = "nan/inf at \\\\d+ of"\n').entries
    assert entry.fails_with == r"nan/inf at \d+ of"
    assert load(tmp_path, ENTRY).entries[0].fails_with is None
    message = error_of(tmp_path, ENTRY + 'fails_with = "unclosed ("\n')
    assert "xfail entry 0 (op 'aten.nextafter.default'): fails_with: not a regular expression" in message
    assert "fails_with: '' should be non-empty" in error_of(tmp_path, ENTRY + 'fails_with = ""\n')
