"""A compiled graph's call written out as one Python function for one binding of its sizes, as the default
backend's generated `call` is (issue 29 item 3).

At every call the general loop (`CompiledGraph.run_from`) asks each step what is fixed for the sizes: its
launch configuration, the outputs it allocates, how its launcher takes the arguments, which specialization
of the kernel the arguments select. After the first call for a binding all of that is known, and `write`
writes it out: one function that allocates each output with torch's bare allocator, passes each kernel's
arguments straight to torch's C launcher (or to its stage's launcher: the interpreter's on a CPU), frees each
value after its last reader and returns the outputs. A step it does not write out (an eager call, a
horizontal kernel, a kernel that failed, checks its sizes or compiles for a GPU on the CPU) it calls as the
loop does.

It checks what it assumes before the step that assumes it: the binding of the sizes; for a launch it writes
out, the sizes of the inputs eager steps made, the 0-d values eager checks on the host, the current device,
that no profiler hooks Triton's launches, that the kernel's tensors are 16-byte aligned (what its compiled
specialization assumed) and that those it reads at the flat offset are contiguous. Where a check fails, the general loop runs the call on from that step (`CompiledGraph.resume`).
Where a launch it wrote out raises, the step gives up as in the loop (`LaunchStep.give_up`) and the graph
drops the function.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import torch

from fuser import metrics
from fuser.lower.ops import overflows
from fuser.lower.views import contiguous_strides
from fuser.runtime import direct_launch
from fuser.runtime.allocate import bare_allocator
from fuser.runtime.eager_step import materialize
from fuser.runtime.kernel_step import KernelStep, Launch, Stage

if TYPE_CHECKING:
    from fuser.runtime.graph import CompiledGraph


def write(graph: CompiledGraph, key: tuple[int, ...]) -> Callable[[list], list] | None:
    """The graph's call for the binding `key`, written out; None where it would write out no launch."""
    writer = _Writer(graph, key)
    source = writer.source()
    if writer.launches == 0:
        return None
    namespace = dict(writer.names)
    exec(compile(source, f"<fuser call of {len(graph.steps)} step(s)>", "exec"), namespace)
    call = namespace["call"]
    call.source = source  # for a reader debugging a call: print(graph.call.source)
    return call


def _written(step: Any, key: tuple[int, ...]) -> Launch | None:
    """The launch of a kernel step for `key` that a call function writes out, or None."""
    if not isinstance(step, KernelStep) or step.failed or step.check_capability is not None:
        return None
    launch = step.launches.get(key)
    if launch is None or launch.empty:
        return None
    return launch if all(stage.launcher is not None for stage in launch.stages) else None


class _Writer:
    """Writes the function's lines, binding every value they read as a name in its namespace."""

    def __init__(self, graph: CompiledGraph, key: tuple[int, ...]):
        self.graph, self.key = graph, key
        self.names: dict[str, Any] = {"resume": graph.resume, "gave_up": graph.gave_up, "bump": metrics.bump}
        self.lines: list[str] = []
        self.launches = 0  # launches written out before the current line (counted at each exit)
        # Each step with the launch written out for it, or None where the step is called as the loop calls it.
        self.steps = [(step, _written(step, key)) for step in graph.steps]
        on_cuda = any(launch and step.device.type == "cuda" for step, launch in self.steps)
        # The device whose launches it writes out: the current one, checked at each call.
        self.device = direct_launch.current_device() if on_cuda else None

    def bind(self, value: Any, prefix: str) -> str:
        if type(value) in (bool, int, str, type(None)):  # what repr writes back exactly
            return repr(value)
        name = f"{prefix}{len(self.names)}"
        self.names[name] = value
        return name

    def exit(self, start: int) -> str:
        return f"return resume({start}, env, key, {self.launches})"

    def source(self) -> str:
        graph, out = self.graph, self.lines
        out.append("def call(args):")
        if graph.binder.sources:
            out.append(f"    key = {self.bind(graph.binder.key, 'binding')}(args)")
        else:
            out.append("    key = ()")
        if graph.leading:
            out.append(f"    env = args + [None] * {len(graph.slots) - len(graph.placeholders)}")
        else:
            out.append(f"    env = [None] * {len(graph.slots)}")
            out += [f"    env[{slot}] = args[{i}]" for i, slot in enumerate(graph.placeholders)]
        out.append("    args.clear()")
        if graph.binder.sources:
            out.append(f"    if key != {self.key!r}:")
            out.append(f"        {self.exit(0)}")
        for slot, value in graph.attributes:
            out.append(f"    env[{slot}] = {self.bind(value, 'attribute')}")
        if self.device is not None:
            device = self.bind(direct_launch.current_device, "current_device")
            idle = self.bind(direct_launch.hooks_idle, "hooks_idle")
            out.append(f"    if {device}() != {self.device} or not {idle}():")
            out.append(f"        {self.exit(0)}")
            out.append(f"    stream = {self.bind(direct_launch.stream_of, 'stream_of')}({self.device})")
        for index, ((step, launch), frees) in enumerate(zip(self.steps, graph.frees, strict=True)):
            if launch is None:
                out.append(f"    {self.bind(step, 'step')}(env, key)")
            else:
                self.kernel(index, step, launch)
            out += [f"    env[{slot}] = None" for slot in frees]
        if self.launches:
            out.append(f"    bump('kernels_launched', {self.launches})")
        if graph.output_slots is not None:
            out.append(f"    return [{', '.join(f'env[{slot}]' for slot in graph.output_slots)}]")
        else:
            spec, slots = self.bind(graph.output_spec, "spec"), self.bind(graph.slots, "slots")
            out.append(f"    return list({self.bind(materialize, 'materialize')}({spec}, env, {slots}))")
        return "\n".join(out) + "\n"

    def kernel(self, index: int, step: KernelStep, launch: Launch) -> None:
        out = self.lines
        statics = [self.static(stage) for stage in launch.stages]
        outputs = [f"env[{slot}]" for *_, slot in launch.outputs]
        # What it checks before it allocates: the specialization's alignment, the flat inputs' layout.
        aligned = []
        if any(statics):  # fresh outputs and workspaces are aligned: torch allocates whole blocks
            tensors = [slot for stage in launch.stages for _, slot in stage.tensors]
            aligned = list(dict.fromkeys(tensors + [into for into in step.into_slots if into is not None]))
        if aligned:
            out.append(f"    if ({' | '.join(f'env[{s}].data_ptr()' for s in aligned)}) & 15:")
            out.append(f"        {self.exit(index)}")
        # An eager step made an input whose size may depend on data: the loop checks it each call.
        for slot, planned in launch.made_eagerly:
            out.append(f"    if env[{slot}].shape != {planned!r}:")
            out.append(f"        {self.exit(index)}")
        # A 0-d value eager checks on the host (`LaunchStep.host_checks`): the loop runs one that does not fit.
        for slot, dtype in step.host_checks:
            out.append(
                f"    if {self.bind(overflows, 'overflows')}(env[{slot}].item(), {self.bind(dtype, 'dtype')}):"
            )
            out.append(f"        {self.exit(index)}")
        if step.flat_inputs:
            contiguous = " and ".join(f"env[{s}].is_contiguous()" for s in dict.fromkeys(step.flat_inputs))
            out.append(f"    if not ({contiguous}):")
            out.append(f"        {self.exit(index)}")
        allocate = self.allocator(step)
        for (shape, strides, dtype, slot), into in zip(launch.outputs, step.into_slots, strict=True):
            made = f"env[{into}]" if into is not None else self.new(allocate, shape, strides, dtype)
            out.append(f"    env[{slot}] = {made}")
        partials = []
        for number, (shape, dtype) in enumerate(launch.partials):
            partials.append(f"partials{index}_{number}")
            out.append(f"    {partials[-1]} = {self.new(allocate, shape, contiguous_strides(shape), dtype)}")
        out.append("    try:")
        for stage, static in zip(launch.stages, statics, strict=True):
            args = self.arguments(stage, outputs, partials)
            if static is None:
                out.append(f"        {self.bind(stage, 'stage')}.launcher({', '.join(args)})")
                continue
            passed = [args[i] for i in static.keep] + ["None"] * len(static.scratch)
            fixed = ", ".join(self.bind(value, "fixed") for value in static.fixed)
            entry = self.bind(static.entry, "launch_kernel")
            out.append(f"        {entry}({fixed}, ({', '.join(passed)},), stream)")
        out.append("    except Exception as error:")
        out.append(f"        return gave_up({index}, env, key, error, {self.launches})")
        self.launches += len(launch.stages)

    def static(self, stage: Stage) -> direct_launch.StaticLaunch | None:
        """The stage's launch through torch's C entry point, where it has one on this call's device."""
        launcher = stage.launcher
        if self.device is None or not isinstance(launcher, direct_launch.DirectLauncher):
            return None
        return launcher.written_out(self.device)

    def new(self, allocate: str, shape: tuple, strides: tuple, dtype: torch.dtype) -> str:
        return f"{allocate}({shape!r}, {strides!r}, {self.bind(dtype, 'dtype')})"

    def allocator(self, step: KernelStep) -> str:
        device = step.device
        bare = bare_allocator(device) if device.type == "cpu" or device.index in (None, self.device) else None
        return self.bind(bare or step.allocate, "allocate")

    def arguments(self, stage: Stage, outputs: list[str], partials: list[str]) -> list[str]:
        """Each parameter's expression, in order (constexprs are the launcher's)."""
        args = [self.bind(value, "constant") for value in stage.template]
        for position, slot in stage.tensors:
            args[position] = f"env[{slot}]"
        for position, slot, dim in stage.strides:
            args[position] = f"env[{slot}].stride({dim})"
        for position, index in stage.outputs:
            args[position] = outputs[index]
        for position, index in stage.partials:
            args[position] = partials[index]
        return args
