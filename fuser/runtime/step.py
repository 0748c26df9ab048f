"""What every kernel-launching step shares: a kernel that fails to launch runs its nodes eagerly (unless
the compile is strict), as does a call whose inputs are not the sizes the kernel was planned for or that
eager would reject for a value it reads on the host, and a kernel that reads an input at the flat offset
refuses a strided one."""

from __future__ import annotations

import logging
from typing import Any

import torch

from fuser import metrics
from fuser.lower.ops import overflows

log = logging.getLogger("fuser")


class GraphCaptureError(RuntimeError):
    """A step that cannot be captured in a CUDA graph as it stands (`fuser.runtime.cuda_graphs`)."""


def sized_as_planned(made_eagerly: list[tuple[int, tuple[int, ...]]], env: list, kernel: str) -> bool:
    """Whether the inputs eager steps made this call have the sizes the kernel was planned for; where
    one does not (its size depends on data the tracer did not see), logs it: the caller runs the
    kernel's nodes eagerly for this call."""
    for slot, planned in made_eagerly:
        if env[slot].shape != planned:
            log.info(
                "fuser: kernel %s was planned for an input of size %s, which an eager step made %s at "
                "run time; its nodes run eagerly for this call",
                kernel,
                list(planned),
                list(env[slot].shape),
            )
            metrics.bump("fallbacks")
            return False
    return True


class LaunchStep:
    """A step that launches a generated kernel, with the eager fallback around it.

    A subclass provides `name` (the kernel's), `strict`, `flat_inputs` (the env slots the kernel reads at
    the flat offset), `fallback(env, key)` (its nodes, run eagerly) and three steps of a call:
    `launch(key)`, the sizes made concrete for this binding of the symbols (with `made_eagerly`), which
    it caches in `launches` by key;
    `prepare(launch, env)`, which sets the outputs in env and returns what `run` needs, or None when
    there is nothing to compute; and `run(launch, env, key, prepared)`, which launches.
    """

    failed = False  # a launch failed: every later call runs the nodes eagerly
    # (env slot, result dtype) of each 0-d value eager reads on the host and converts with a checked
    # conversion (`fuser.lower.nodes.host_read_values`): one that does not fit runs the nodes eagerly, so
    # the call raises as eager does where a kernel would store a wrapped value.
    host_checks: tuple[tuple[int, torch.dtype], ...] = ()

    def __call__(self, env: list, key: tuple[int, ...]) -> None:
        if self.failed or (self.host_checks and self.rejects_a_value(env)):
            self.fallback(env, key)
            return
        launch = self.launches.get(key) or self.launch(key)
        if launch.made_eagerly and not sized_as_planned(launch.made_eagerly, env, self.name):
            self.fallback(env, key)
            return
        prepared = self.prepare(launch, env)
        if prepared is None:
            return
        # In C (map): a horizontal step reads a thousand inputs a call, which a Python loop makes cost more
        # host time than the kernel takes on a GPU.
        if not all(map(torch.Tensor.is_contiguous, map(env.__getitem__, self.flat_inputs))):
            strided = next(env[slot] for slot in self.flat_inputs if not env[slot].is_contiguous())
            raise RuntimeError(
                f"fuser: kernel {self.name} was generated for a contiguous input but got "
                f"strides {strided.stride()}; this is a bug in the fuser's layout tracking"
            )
        try:
            self.run(launch, env, key, prepared)
        except GraphCaptureError:
            raise  # the capture is given up (fuser.runtime.cuda_graphs), not the kernel
        except Exception as error:
            self.give_up(env, key, error)

    def rejects_a_value(self, env: list) -> bool:
        """Whether eager would reject a 0-d value of `host_checks` (its checked conversion overflows)."""
        return any(overflows(env[slot].item(), dtype) for slot, dtype in self.host_checks)

    def give_up(self, env: list, key: tuple[int, ...], error: Exception) -> None:
        """A launch failed: raise where the compile is strict; else run the nodes eagerly, now and at every
        later call."""
        if self.strict:
            raise error
        log.warning(
            "fuser: kernel %s failed (%s: %s); running its nodes eagerly",
            self.name,
            type(error).__name__,
            error,
        )
        metrics.bump("fallbacks")
        self.failed = True
        self.fallback(env, key)

    def prepare(self, launch: Any, env: list) -> Any:
        raise NotImplementedError

    def run(self, launch: Any, env: list, key: tuple[int, ...], prepared: Any) -> None:
        raise NotImplementedError
