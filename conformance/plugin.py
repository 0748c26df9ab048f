"""The conformance suite's pytest plugin. Opt-in: installing the package changes no other project's
pytest runs. A run that collects from `conformance/` loads it through `conformance/conftest.py`; from
anywhere else, `pytest -p conformance.plugin --pyargs conformance.test_ops`.

Options, all named `--conformance-*` so they cannot collide with a project's own `--device` or
`--backend`: `--conformance-backend` (fuser, inductor, aot_eager, eager, or module:callable),
`--conformance-device` (cpu, cuda), `--conformance-op`, `--conformance-dtype`, `--conformance-context`,
`--conformance-direction` (each repeatable or comma-separated), `--conformance-tier` (quick for a pull
request, full, models), `--conformance-shard K/N`, `--conformance-ledger FILE`,
`--conformance-case-time-limit S`, `--conformance-report DIR` (JSON + Markdown written there) and
`--conformance-resume REPORT` (an earlier run's report, .json or .json.gz: the cases it passed or xfailed
are not run again, so a run cut short by a machine's time limit goes on where it stopped).

The plugin parametrizes `conformance/test_ops.py` with one case per op x dtype x context x direction
that the tier selects, marks the cases the ledger expects to fail as strict xfails (one that passes
fails the run), refuses a ledger entry that matches no case (a typo, or a fixed bug), prints a
command that reruns exactly a failing case, and writes the report at the end. A case that failed with
`NotValidated` (the backend ran the op eagerly because it is not validated here: test_ops.py) is
reported as `not_validated`, apart from failures and passes.
"""

from __future__ import annotations

import datetime
import gzip
import json
import shlex
import sys
from collections.abc import Callable
from dataclasses import asdict, dataclass
from functools import cache
from pathlib import Path

import pytest
import torch

from conformance.harness import cores, report
from conformance.harness.ledger import Ledger
from conformance.harness.report import CaseResult
from conformance.harness.runner import has_backward, resolve_backend, supported_dtypes
from conformance.harness.time_limit import CaseTimeLimit, case_time_limit
from conformance.specs.caseid import CONTEXTS, DEVICES, DIRECTIONS, DTYPES, CaseKey
from conformance.specs.catalog import SPECS, overload_counts
from conformance.specs.tiers import OP_TIERS, TIER_NAMES, cases_for

FIXTURE = "conformance_case"
FINISHED = pytest.StashKey[dict]()  # the cases --conformance-resume's reports passed, with their results
PROGRAM_FILES = ("test_blocks.py", "test_optimizers.py")  # the `models` tier's tests
# Ten times the slowest case seen on two CPU cores (about 60 s): only a case that hangs reaches it.
DEFAULT_CASE_TIME_LIMIT_S = 600.0


def option(name: str) -> str:
    """The command-line spelling of one of the plugin's options (`backend` -> `--conformance-backend`)."""
    return f"--conformance-{name.replace('_', '-')}"


def get(config: pytest.Config, name: str):
    return config.getoption(f"conformance_{name}")


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("conformance", "op conformance against eager PyTorch")
    group.addoption(option("backend"), default="fuser", help="torch.compile backend, or module:callable")
    group.addoption(option("device"), default="cpu", choices=DEVICES)
    group.addoption(option("tier"), default="quick", choices=TIER_NAMES)
    for name, known in (("op", None), ("dtype", DTYPES), ("context", CONTEXTS), ("direction", DIRECTIONS)):
        group.addoption(
            option(name),
            action="append",
            default=[],
            help=f"only these (repeatable, comma-separated){'; one of ' + ', '.join(known) if known else ''}",
        )
    group.addoption(
        option("shard"), default=None, help="K/N: only the K-th of N equal shares of the ops (1-based)"
    )
    group.addoption("--conformance-report", default=None, help="directory for the JSON and Markdown report")
    group.addoption(
        option("resume"),
        action="append",
        default=[],
        help="an earlier run's report (.json or .json.gz): its passed and xfailed cases are not run again (repeatable)",
    )
    group.addoption(option("ledger"), default=None, help="expected-failures file (default: the packaged one)")
    group.addoption(
        option("case_time_limit"),
        type=float,
        default=DEFAULT_CASE_TIME_LIMIT_S,
        help=f"seconds one case may run before it fails with where it was; 0: none (default {DEFAULT_CASE_TIME_LIMIT_S:g})",
    )


@dataclass(frozen=True)
class Selection:
    backend: str
    device: str
    tier: str
    ops: tuple[str, ...]
    dtypes: tuple[str, ...]
    contexts: tuple[str, ...]
    directions: tuple[str, ...]
    shard: tuple[int, int] | None = None


def _listed(config: pytest.Config, name: str, known=None) -> tuple[str, ...]:
    values = tuple(v.strip() for given in get(config, name) for v in given.split(",") if v.strip())
    unknown = [v for v in values if v not in (known if known is not None else SPECS)]
    if unknown:
        hint = (
            ""
            if known is not None
            else " (see conformance.specs.catalog.SPECS; ops are named like aten.add.Tensor)"
        )
        raise pytest.UsageError(f"{option(name)}: unknown {', '.join(unknown)}{hint}")
    return values


def selection(config: pytest.Config) -> Selection:
    backend = get(config, "backend")
    try:
        resolve_backend(backend)
    except ValueError as error:
        raise pytest.UsageError(f"{option('backend')}: {error}") from None
    device = get(config, "device")
    if device == "cuda" and not torch.cuda.is_available():
        raise pytest.UsageError(f"{option('device')} cuda: this machine has no CUDA device")
    return Selection(
        backend=backend,
        device=device,
        tier=get(config, "tier"),
        ops=_listed(config, "op"),
        dtypes=_listed(config, "dtype", DTYPES),
        contexts=_listed(config, "context", CONTEXTS),
        directions=_listed(config, "direction", DIRECTIONS),
        shard=_shard(get(config, "shard")),
    )


def finished_cases(paths: list[str], tier: str) -> dict[CaseKey, CaseResult]:
    """The cases that passed or xfailed in earlier reports of this tier (a failed one runs again)."""
    done = {}
    for path in paths:
        try:
            data = json.loads((gzip.open if path.endswith(".gz") else open)(path, "rt").read())
        except (OSError, ValueError) as error:
            raise pytest.UsageError(f"{option('resume')} {path}: not a readable report ({error})") from None
        if data.get("meta", {}).get("tier") != tier:
            raise pytest.UsageError(
                f"{option('resume')} {path}: a report of the {data.get('meta', {}).get('tier')!r} tier, not {tier!r}"
            )
        for case in data["cases"]:
            if case["outcome"] in ("passed", "xfailed"):
                result = report.case_from_json(case)
                done[result.key] = result
    return done


def _shard(text: str | None) -> tuple[int, int] | None:
    if text is None:
        return None
    k, _, n = text.partition("/")
    if not (k.isdigit() and n.isdigit() and 1 <= int(k) <= int(n)):
        raise pytest.UsageError(f"{option('shard')} {text!r}: expected K/N with 1 <= K <= N, e.g. 2/3")
    return int(k), int(n)


@cache
def _dtypes(op: str, device: str) -> tuple[str, ...]:
    return tuple(supported_dtypes(SPECS[op], device))


@cache
def _has_backward(op: str, device: str, dtype: str) -> bool:
    return has_backward(SPECS[op], dtype, device)


def cases(op: str, tier: str, backend: str, device: str) -> list[CaseKey]:
    """The op's cases in `tier`: its dtypes eager supports, backward where eager has one."""
    return cases_for(
        SPECS[op], _dtypes(op, device), tier, backend, device, lambda d: _has_backward(op, device, d)
    )


def selected_cases(chosen: Selection) -> list[CaseKey]:
    """The cases the options select, in the tier's order."""
    ops = list(chosen.ops or SPECS)
    if chosen.shard:
        k, n = chosen.shard
        ops = ops[k - 1 :: n]
    return [
        key
        for op in ops
        for key in cases(op, chosen.tier, chosen.backend, chosen.device)
        if (not chosen.dtypes or key.dtype in chosen.dtypes)
        and (not chosen.contexts or key.context in chosen.contexts)
        and (not chosen.directions or key.direction in chosen.directions)
    ]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if FIXTURE not in metafunc.fixturenames:
        return
    config = metafunc.config
    chosen = selection(config)
    if chosen.tier not in OP_TIERS:
        metafunc.parametrize(FIXTURE, [])  # deselected below: this tier runs no op case
        return
    ledger = Ledger.load(Path(get(config, "ledger")) if get(config, "ledger") else None, SPECS)
    # A ledger entry that matches no case of the whole suite is a typo or a fixed bug (checked on
    # unfiltered runs: a run of one op leaves the other ops' entries unmatched by design).
    every = [
        key
        for op in ([] if chosen.ops else SPECS)
        for key in cases(op, "full", chosen.backend, chosen.device)
    ]
    dead = ledger.unused(every, chosen.backend, chosen.device) if every else []
    if dead:
        lines = "\n".join(f"  {entry.op}: {entry.reason}" for entry in dead)
        raise pytest.UsageError(
            f"{ledger.path}: entries that match no case of this backend and device:\n{lines}"
        )
    untested = untested_ops(list(chosen.ops or SPECS), lambda op: _dtypes(op, chosen.device))
    if untested:
        raise pytest.UsageError(
            f"eager rejects every sample of these ops in every dtype on {chosen.device}, so they would "
            f"test nothing (a spec bug: check their variants and sample arguments): {', '.join(untested)}"
        )
    params, done = [], config.stash[FINISHED]
    resumed = 0
    for key in selected_cases(chosen):
        if key in done:
            resumed += 1
            continue
        entry = ledger.match(key, chosen.tier)
        marks = (
            [pytest.mark.xfail(reason=entry.reason, strict=not entry.outcome_varies, raises=AssertionError)]
            if entry
            else []
        )
        if entry and entry.fails_with:
            marks.append(pytest.mark.conformance_fails_with(entry.fails_with))
        params.append(pytest.param(key, id=key.test_id, marks=marks))
    if not params and resumed:
        raise pytest.UsageError(
            f"all {resumed} cases of this selection passed in the {option('resume')} reports"
        )
    if not params:
        # An empty selection would show as one skipped test: say why instead.
        raise pytest.UsageError(
            f"no conformance case matches this selection ({chosen}); check {option('op')}, {option('dtype')}, {option('device')}"
        )
    metafunc.parametrize(FIXTURE, params)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The tier picks the tests: op cases for `quick` and `full`; whole programs — the model blocks and
    the optimizer steps — for `models`."""
    models = get(config, "tier") == "models"
    keep, drop = [], []
    for item in items:
        is_block = item.path.name in PROGRAM_FILES and item.path.parent.name == "conformance"
        is_op_case = FIXTURE in getattr(item, "fixturenames", ())
        (drop if (models and is_op_case) or (not models and is_block) else keep).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


def untested_ops(ops: list[str], dtypes_of: Callable[[str], tuple[str, ...]]) -> list[str]:
    """Ops with no dtype that eager accepts: silently dead unless reported."""
    return [op for op in ops if not dtypes_of(op)]


def rerun_command(key: CaseKey, tier: str) -> str:
    chosen = {"backend": key.backend, "device": key.device, "tier": tier, "op": key.op, "dtype": key.dtype}
    chosen |= {"context": key.context, "direction": key.direction}
    return "nox -s conformance -- " + shlex.join(
        part for name, value in chosen.items() for part in (option(name), value)
    )


def full_tier_command(backend: str, device: str, ops: list[str] | tuple[str, ...]) -> list[str]:
    """The pytest command that runs these ops' full tier in a fresh process, as validation runs it (the
    caller adds workers and its own plugins)."""
    command = [sys.executable, "-m", "pytest", str(Path(__file__).with_name("test_ops.py"))]
    command += ["-p", "no:benchmark", "-p", "no:cacheprovider", "-q", option("tier"), "full"]
    return [*command, option("backend"), backend, option("device"), device, option("op"), ",".join(ops)]


def _case_key(item: pytest.Item) -> CaseKey | None:
    """The op case an item runs, or None for any other test (a model block, a test of the product)."""
    callspec = getattr(item, "callspec", None)
    return callspec.params.get(FIXTURE) if callspec is not None else None


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    outcome = yield
    result = outcome.get_result()
    key = _case_key(item)
    if key is None or result.when != "call":
        return
    tier = get(item.config, "tier")
    result.user_properties.append(("conformance_case", asdict(key)))
    if result.failed:
        result.sections.append(("rerun this case", rerun_command(key, tier)))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item):
    """Runs an op case under the case time limit; a case past it fails like a wrong answer (the ledger
    can expect it) with where it was, and the run goes on."""
    if _case_key(item) is None:
        return (yield)
    try:
        with case_time_limit(get(item.config, "case_time_limit")):
            return (yield)
    except CaseTimeLimit as stop:
        raise AssertionError(str(stop)) from None


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "conformance_fails_with(pattern): the ledger's expected failure must match the pattern"
    )
    chosen = selection(config)  # bad options are usage errors before anything is collected
    if get(config, "case_time_limit") < 0:
        raise pytest.UsageError(
            f"{option('case_time_limit')} {get(config, 'case_time_limit'):g}: seconds, 0 or more (0: no limit)"
        )
    config.stash[FINISHED] = finished_cases(get(config, "resume"), chosen.tier)
    _share_machine(chosen.device, getattr(config, "workerinput", None))


def _share_machine(device: str, workerinput: dict | None) -> None:
    """Spreads xdist workers over the machine: worker k runs on GPU k mod the GPU count, and each worker
    takes its share of the CPU cores for eager's CPU kernels. Left alone, every worker starts one thread
    per core (15 workers on 16 cores ran 240 spinning threads) and every worker uses GPU 0."""
    if workerinput is None:
        return
    index = int(workerinput["workerid"].removeprefix("gw"))
    workers = int(workerinput["workercount"])
    cores.take_share(workers)
    if device == "cuda":
        torch.cuda.set_device(index % torch.cuda.device_count())


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Collects each case's outcome (on the xdist controller too: workers forward their reports)."""
    properties = dict(report.user_properties)
    if report.when != "call" or "conformance_case" not in properties:
        return
    key = CaseKey(**properties["conformance_case"])
    message = ""
    if hasattr(report, "wasxfail"):
        # Not skipped: a non-strict expected failure (its outcome varies from run to run) passed this run.
        outcome = "xfailed" if report.skipped else "passed"
        message = report.wasxfail
    elif report.failed and str(report.longrepr).startswith("[XPASS(strict)]"):
        outcome, message = "xpassed", str(report.longrepr)
    else:
        outcome = report.outcome
        crash = getattr(report.longrepr, "reprcrash", None)
        message = crash.message if report.failed and crash is not None else ""
        if report.failed and properties.get("not_validated"):
            outcome = "not_validated"  # the backend ran the op eagerly by policy: nothing was tested
    samples = int(properties.get("samples", 0))
    ulps = properties.get("ulps")
    ulps = tuple(ulps) if ulps is not None else None
    left_eager = str(properties.get("left_eager", ""))
    config_results().append(CaseResult(key, outcome, report.duration, samples, message, ulps, left_eager))


_RESULTS: list = []


def config_results() -> list:
    return _RESULTS


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    if hasattr(config, "workerinput"):
        return  # an xdist worker: the controller receives every worker's reports and writes the report
    results = config_results()
    if not results:
        return
    chosen = selection(config)
    done = config.stash[FINISHED]
    # A resumed run's report holds the earlier reports' passes in its selection too: the whole run, which a
    # later resume can start from again (nothing the earlier run found is lost by writing over its report).
    carried = [done[key] for key in selected_cases(chosen) if key in done] if done else []
    results = carried + results
    terminalreporter.section("conformance")
    terminalreporter.write_line(report.summary(results))
    if carried:
        terminalreporter.write_line(
            f"of which {len(carried)} passed in the {option('resume')} reports, not run again"
        )
    terminalreporter.write_line(report.known_line({"known": overload_counts()}))
    directory = config.getoption("conformance_report")
    if directory:
        meta = {
            "backend": chosen.backend,
            "device": chosen.device,
            "device_name": torch.cuda.get_device_name() if chosen.device == "cuda" else "cpu",
            "tier": chosen.tier,
            "torch": torch.__version__,
            "triton": _triton_version(),
            "python": sys.version.split()[0],
            "date": datetime.date.today().isoformat(),
            "command": "pytest " + shlex.join(config.invocation_params.args),
            # The controller's -n (xdist sets PYTEST_XDIST_WORKER_COUNT in the workers only).
            "workers": str(getattr(config.option, "numprocesses", None) or 1),
            "gpus": torch.cuda.device_count() if chosen.device == "cuda" else 0,
            "known": overload_counts(),
            "resumed": {"from": get(config, "resume"), "cases": len(carried)},
        }
        json_path, md_path = report.write(results, meta, Path(directory))
        terminalreporter.write_line(f"report: {json_path} and {md_path}")


def _triton_version() -> str:
    try:
        import triton

        return triton.__version__
    except ImportError:
        return "not installed"
