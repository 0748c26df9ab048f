"""CI's checks of the validation manifests (fuser/manifest/<arch>.toml): schema-valid, every entry fresh
(its lowering unchanged since it was validated), every case count what validating the op here runs,
no entry for an op that no longer exists, and no op fused on cpu without an entry. That every op the
cpu manifest enables still passes is the conformance quick tier's job (`nox -s conformance`).
"""

from __future__ import annotations

import re
import warnings
from pathlib import Path

import pytest
import torch

import fuser
from conformance.validate import manifest_check
from fuser.lower.lowerings import fingerprint, lowerings
from fuser.validate import validation

CPU = validation.manifest_path("cpu")


def test_the_committed_manifests_are_schema_valid_fresh_and_counted():
    paths = sorted(validation.MANIFEST_DIR.glob("*.toml"))
    assert CPU in paths
    found = [problem for path in paths for problem in manifest_check.problems(path)]
    assert not found, "\n".join(found)
    # A GPU manifest's gaps cannot be mended here: reported, and those ops run eagerly there.
    for path in paths:
        manifest = validation.parse(path.read_text(), path)
        gaps = manifest_check.unvalidated(manifest)
        if gaps:
            warnings.warn(
                f"{path.name}: {len(gaps)} lowered op(s) not validated there, so run eagerly: {gaps}",
                stacklevel=1,
            )


def test_a_lowered_op_missing_from_the_cpu_manifest_is_reported_and_fails_once_coverage_is_required(
    tmp_path, monkeypatch
):
    path = _write(tmp_path)
    monkeypatch.setattr(manifest_check, "MISSING_CPU_ENTRIES_FAIL", False)  # before coverage was required
    assert not [p for p in manifest_check.problems(path) if "no entry" in p]
    gaps = manifest_check.unvalidated(validation.parse(path.read_text(), path))
    assert "aten.add.Tensor: no entry in cpu.toml" in gaps
    monkeypatch.setattr(manifest_check, "MISSING_CPU_ENTRIES_FAIL", True)  # since 2026-11-27
    found = manifest_check.problems(path)
    assert (
        f"{path}: aten.add.Tensor: no entry in cpu.toml; run `nox -s validate -- --all-unvalidated`" in found
    )


def test_a_gpu_manifests_stale_entry_is_reported_not_failed(tmp_path):
    path = tmp_path / "sm_90.toml"
    path.write_text(
        ENTRY.replace('arch = "cpu"', 'arch = "sm_90"').format(
            cases=65, commit="483cb1e", fingerprint="0" * 16
        )
    )
    assert manifest_check.problems(path) == []
    gaps = manifest_check.unvalidated(validation.parse(path.read_text(), path))
    assert "aten.neg.default: stale: its kernels changed since it was validated (2026-11-25)" in gaps
    assert "aten.add.Tensor: no entry in sm_90.toml" in gaps


def test_no_op_is_fused_on_cpu_without_an_entry(tmp_path, monkeypatch):
    """The gate is on by default (CI does not opt in), and it follows the committed manifest: an op
    without an entry runs eagerly; one with an entry is fused."""
    monkeypatch.delenv("FUSER_UNVALIDATED", raising=False)
    assert fuser.Options.from_dict({}).unvalidated == "eager"
    manifest = validation.load("cpu")
    assert manifest is not None and "aten.neg.default" in manifest.entries
    assert set(manifest.entries) <= set(lowerings())
    text = CPU.read_text()
    without = re.sub(r'\[\[op\]\]\nop = "aten\.neg\.default"\n(?:[^\n]+\n)*', "", text)
    assert without != text
    (tmp_path / "cpu.toml").write_text(without)
    monkeypatch.setattr(validation, "MANIFEST_DIR", tmp_path)
    validation.reload()
    try:
        report = fuser.explain(lambda x: -x, torch.randn(8))
        assert report.num_kernels == 0
        assert report.fallbacks[0][0] == "aten.neg.default"
    finally:
        validation.reload()


ENTRY = """\
[[op]]
op = "aten.neg.default"
arch = "cpu"
dtypes = ["float32"]
torch = "2.13.0"
triton = "3.9.0"
date = "2026-11-25"
cases = {cases}
commit = "{commit}"
fingerprint = "{fingerprint}"
"""


def _write(tmp_path: Path, cases=65, commit="483cb1e", fingerprint_=None, extra="") -> Path:
    path = tmp_path / "cpu.toml"
    fields = {
        "cases": cases,
        "commit": commit,
        "fingerprint": fingerprint_ or fingerprint("aten.neg.default", "cpu"),
    }
    path.write_text("# header\n\n" + ENTRY.format(**fields) + extra)
    return path


def test_a_good_entry_passes(tmp_path):
    # A cpu manifest must cover every lowered op: here, one op's entry is checked on its own.
    assert [p for p in manifest_check.problems(_write(tmp_path)) if "no entry in" not in p] == []


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"cases": 66}, r"cpu.toml:3: aten.neg.default: cases = 66, but validating it here runs 65 cases"),
        ({"fingerprint_": "0123456789abcdef"}, r"cpu.toml: aten.neg.default: stale: its kernels changed"),
        ({"commit": "main"}, r"cpu.toml:3: commit: 'main' does not match"),
        ({"fingerprint_": "xyz"}, r"cpu.toml:3: fingerprint: 'xyz' does not match"),
        ({"extra": 'colour = "red"\n'}, r"cpu.toml:3: entry: Additional properties are not allowed"),
        (
            {"extra": '[[op]]\nop = "aten.gone.default"\n'},
            r"cpu.toml:13: entry: 'arch' is a required property",
        ),
    ],
    ids=["hand-edited-cases", "stale", "commit", "fingerprint", "unknown-field", "second-entry-incomplete"],
)
def test_a_bad_entry_is_reported_with_file_and_line(tmp_path, kwargs, message):
    found = manifest_check.problems(_write(tmp_path, **kwargs))
    assert any(re.search(message, problem) for problem in found), found


def test_an_op_that_no_longer_exists_is_reported(tmp_path):
    path = _write(tmp_path)
    path.write_text(path.read_text().replace("aten.neg.default", "aten.negative_old.default"))
    (problem, *_) = manifest_check.problems(path)
    assert re.search(r"cpu.toml:3: unknown op 'aten.negative_old.default'", problem)


def test_the_checker_names_a_missing_file_or_an_unknown_option_instead_of_a_traceback(tmp_path, capsys):
    for argv in ([str(tmp_path / "sm_90.toml")], ["--arch", "sm_90"]):
        with pytest.raises(SystemExit) as stopped:
            manifest_check.main(argv)
        assert stopped.value.code == 2
    err = capsys.readouterr().err
    assert "no such manifest" in err and "unrecognized arguments: --arch" in err
