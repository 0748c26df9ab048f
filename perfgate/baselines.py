"""Baseline files: one per architecture (`perfgate/baselines/sm_90.json`, `cpu.json`), schema-checked.

Layout, per backend:

    any_device: metrics the same on every device of the architecture (kernel launches, bytes moved)
    devices: {device name: per-device metrics (timings, instruction counts)}

Each section records the device, driver, versions, date and commit of the run that wrote it. Only
`python -m perfgate update` writes these files, so every change shows up as a reviewable diff;
updating on one device rewrites that device's section and leaves the other devices' alone.
`python -m perfgate forget` only removes: a workload whose program changed loses its entries on an
architecture this machine cannot measure, so the gate reports it as having no baseline there rather
than comparing the new program with the old one's numbers.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import jsonschema

from perfgate.machine import Machine
from perfgate.metrics import METRICS, Measurements, Sample
from perfgate.workloads import WORKLOADS

BASELINE_DIR = Path(__file__).parent / "baselines"
SCHEMA_VERSION = 1


def baseline_path(architecture: str, directory: Path = BASELINE_DIR) -> Path:
    return directory / f"{architecture}.json"


def _workloads_schema(per_device: bool) -> dict[str, Any]:
    metrics = sorted(name for name, m in METRICS.items() if m.per_device == per_device)
    sample = {
        "oneOf": [
            {"type": "number"},
            {
                "type": "object",
                "required": ["median", "mad", "n"],
                "additionalProperties": False,
                "properties": {
                    "median": {"type": "number"},
                    "mad": {"type": "number", "minimum": 0},
                    "n": {"type": "integer", "minimum": 1},
                },
            },
        ]
    }
    measured = {"type": "object", "propertyNames": {"enum": metrics}, "additionalProperties": sample}
    return {"type": "object", "propertyNames": {"enum": sorted(WORKLOADS)}, "additionalProperties": measured}


def _section_schema(per_device: bool) -> dict[str, Any]:
    text = {"type": "string"}
    recorded = {
        "type": "object",
        "required": ["device", "driver", "torch", "triton", "python", "date", "commit"],
        "additionalProperties": False,
        "properties": {
            "device": text,
            "driver": {"type": ["string", "null"]},
            "torch": text,
            "triton": text,
            "python": text,
            "date": {"type": "string", "pattern": r"^\d{4}-\d{2}-\d{2}$"},
            "commit": text,
        },
    }
    return {
        "type": "object",
        "required": ["recorded", "workloads"],
        "additionalProperties": False,
        "properties": {"recorded": recorded, "workloads": _workloads_schema(per_device)},
    }


SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "required": ["schema_version", "architecture", "backends"],
    "additionalProperties": False,
    "properties": {
        "schema_version": {"const": SCHEMA_VERSION},
        "architecture": {"type": "string", "pattern": r"^(cpu|sm_\d+a?)$"},
        "backends": {
            "type": "object",
            "additionalProperties": {
                "type": "object",
                "required": ["any_device", "devices"],
                "additionalProperties": False,
                "properties": {
                    "any_device": _section_schema(per_device=False),
                    "devices": {"type": "object", "additionalProperties": _section_schema(per_device=True)},
                },
            },
        },
    },
}


def load(path: Path) -> dict[str, Any] | None:
    """The baseline at `path`, validated; None if there is no file."""
    if not path.exists():
        return None
    data = json.loads(path.read_text())
    jsonschema.validate(data, SCHEMA)
    return data


def expected(
    baseline: dict[str, Any] | None, backend: str, device: str
) -> tuple[dict[str, Measurements], bool]:
    """The baseline's measurements of each workload for this backend and device, and whether the device
    has a section (without one, per-device metrics are reported as having no baseline for this device)."""
    sections = (baseline or {}).get("backends", {}).get(backend)
    if sections is None:
        return {}, False
    device_section = sections["devices"].get(device)
    merged: dict[str, Measurements] = {}
    for section in (sections["any_device"], device_section or {"workloads": {}}):
        for workload, metrics in section["workloads"].items():
            merged.setdefault(workload, {}).update(
                {name: Sample.from_json(value) for name, value in metrics.items()}
            )
    return merged, device_section is not None


def _section(machine: Machine, measured: dict[str, Measurements], per_device: bool, old: dict | None) -> dict:
    workloads = dict((old or {}).get("workloads", {}))
    for workload, metrics in measured.items():
        workloads[workload] = {
            name: sample.to_json()
            for name, sample in metrics.items()
            if sample is not None and METRICS[name].per_device == per_device
        }
    return {"recorded": machine.recorded(), "workloads": dict(sorted(workloads.items()))}


def updated(
    baseline: dict[str, Any] | None, machine: Machine, backend: str, measured: dict[str, Measurements]
) -> dict[str, Any]:
    """`baseline` with this backend's any-device section and this device's section remeasured.

    Workloads not measured this time keep their entries, as do other devices and backends."""
    data = copy.deepcopy(baseline) or {
        "schema_version": SCHEMA_VERSION,
        "architecture": machine.architecture,
        "backends": {},
    }
    if data["architecture"] != machine.architecture:
        raise ValueError(f"a {machine.architecture} run cannot update the {data['architecture']} baseline")
    old = data["backends"].get(backend, {"any_device": None, "devices": {}})
    devices = dict(old["devices"])
    devices[machine.device] = _section(machine, measured, True, devices.get(machine.device))
    data["backends"][backend] = {
        "any_device": _section(machine, measured, False, old["any_device"]),
        "devices": dict(sorted(devices.items())),
    }
    jsonschema.validate(data, SCHEMA)
    return data


def forgotten(baseline: dict[str, Any], workloads: list[str]) -> dict[str, Any]:
    """`baseline` without any entry for `workloads`, in every backend and device: for a workload whose
    program changed, on an architecture this machine cannot measure (its next update records it anew)."""
    data = copy.deepcopy(baseline)
    for sections in data["backends"].values():
        for section in (sections["any_device"], *sections["devices"].values()):
            for workload in workloads:
                section["workloads"].pop(workload, None)
    jsonschema.validate(data, SCHEMA)
    return data


def write(path: Path, baseline: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(baseline, indent=2) + "\n")
