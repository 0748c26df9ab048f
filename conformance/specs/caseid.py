"""What names one conformance case: an op, run in one dtype, context and direction, on one backend and device.

The tuples below are the whole vocabulary: the ledger of expected failures checks its fields against them.
"""

from __future__ import annotations

from dataclasses import dataclass

DTYPES = ("float16", "bfloat16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8", "bool")
# Where the op sits in the compiled graph: on its own, feeding a pointwise op, fed by one, feeding a
# reduction, or fed by one.
CONTEXTS = ("alone", "producer", "consumer", "into_reduction", "from_reduction")
DIRECTIONS = ("fwd", "bwd")
DEVICES = ("cpu", "cuda")
# torch.compile backends the suite knows by name; any other backend is given as "module:callable".
BACKENDS = ("fuser", "inductor", "aot_eager", "eager")


@dataclass(frozen=True)
class CaseKey:
    op: str  # an aten overload: "aten.add.Tensor"
    dtype: str  # one of DTYPES
    context: str  # one of CONTEXTS
    direction: str  # one of DIRECTIONS
    backend: str  # one of BACKENDS, or "module:callable"
    device: str  # one of DEVICES

    @property
    def test_id(self) -> str:
        """The case's pytest parametrize id; backend and device are the run's, so they are left out."""
        return f"{self.op}-{self.dtype}-{self.context}-{self.direction}"
