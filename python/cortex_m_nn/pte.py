"""Read a serialised ExecuTorch program (``.pte``): operators, planned and constant bytes,
the ``cortex_m_nn_*`` metadata methods and an estimate of the runtime's own RAM.

Everything here works from the bytes alone, so the compile report, ``inspect`` (a ``.pte``
found inside a firmware ELF) and the benchmarks (the peer's ``.pte``) count the same way.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

from cortex_m_nn.abi import METADATA_PREFIX, KernelAbi
from cortex_m_nn.pte_format import ExecutionPlan, Program, PteFormatError, read_program

__all__ = ["METADATA_PREFIX", "PteFormatError", "pte_abi", "pte_metadata"]


@lru_cache(maxsize=8)
def _program(pte: bytes) -> Program:
    return read_program(pte)


def forward_plan(pte: bytes) -> ExecutionPlan:
    """The ``forward`` method; :class:`PteFormatError` if the program has none."""
    for plan in _program(pte).plans:
        if plan.name == "forward":
            return plan
    raise PteFormatError("the program has no forward method")


def planned_buffer_bytes(pte: bytes) -> int:
    """Bytes of the memory-planned buffers of ``forward`` (activations, scratch, I/O)."""
    return sum(forward_plan(pte).non_const_buffer_sizes)


def pte_operators(pte: bytes) -> list[str]:
    """Operator names (``ns::name.overload``) of ``forward`` in a serialised program."""
    return [
        f"{name}.{overload}" if overload else name for name, overload in forward_plan(pte).operators
    ]


#: Bytes per element of ExecuTorch's scalar types (``executorch.exir.scalar_type``).
_ELEMENT_BYTES = {0: 1, 1: 1, 2: 2, 3: 4, 4: 8, 5: 2, 6: 4, 7: 8, 11: 1, 12: 1, 13: 1, 15: 2}


def constant_bytes(pte: bytes) -> int:
    """Bytes of constant tensor data (weights, biases, …) stored in the program.

    ExecuTorch stores each distinct byte string once, so this can be less than the sum of
    the constant tensors of the graph. Padding between constants is not counted (see
    :func:`constant_storage_bytes`).
    """
    sizes: dict[int, int] = {}
    for plan in _program(pte).plans:
        for value in plan.values:
            tensor = value.payload
            if value.kind == "Tensor" and tensor.data_buffer_idx > 0 and not tensor.planned:
                element = _ELEMENT_BYTES[tensor.scalar_type]
                sizes[tensor.data_buffer_idx] = element * math.prod(tensor.sizes)
    return sum(sizes.values())


def constant_storage_bytes(pte: bytes) -> int:
    """Bytes the constants take in the file, with the padding that aligns each of them."""
    return _program(pte).constant_storage_bytes


def pte_metadata(pte: bytes) -> dict[str, str]:
    """The ``cortex_m_nn_*`` constant methods (core, isa, rounding, version, ops_version) by
    name, as text."""
    found = {}
    for plan in _program(pte).plans:
        if not plan.name.startswith(METADATA_PREFIX) or len(plan.outputs) != 1:
            continue
        value = plan.values[plan.outputs[0]]
        if value.kind == "String":
            found[plan.name] = value.payload
        elif value.kind == "Int":
            found[plan.name] = str(value.payload)
    return found


def pte_abi(pte: bytes) -> KernelAbi:
    """The kernel ABI (with the core) a .pte was compiled for; KeyError if it records none."""
    return KernelAbi.from_metadata(pte_metadata(pte))


# --- runtime overhead ----------------------------------------------------------------------

#: Bytes of ExecuTorch runtime structures on a 32-bit Cortex-M (from the runtime's headers:
#: ``EValue`` is an 8-byte payload and a tag, ``TensorImpl`` four pointers and five scalars).
EVALUE_BYTES = 16
TENSOR_IMPL_BYTES = 32
POINTER_BYTES = 4
#: Fixed part: Program/Method bookkeeping, chain and allocator headers (rounded up).
RUNTIME_FIXED_BYTES = 512


@dataclass(frozen=True)
class RuntimeOverhead:
    """Estimated bytes the ExecuTorch runtime takes from its method allocator for ``forward``."""

    values: int
    tensors: int
    lists: int
    instructions: int
    fixed: int = RUNTIME_FIXED_BYTES

    @property
    def total(self) -> int:
        return self.values + self.tensors + self.lists + self.instructions + self.fixed


#: How the estimate is computed, for the report.
RUNTIME_OVERHEAD_FORMULA = (
    f"{EVALUE_BYTES} B per value + ({TENSOR_IMPL_BYTES} B + 4 B per dimension) per tensor + "
    "(12 B + 12 B per item) per list + (4 B per argument + 12 B) per instruction + "
    f"{RUNTIME_FIXED_BYTES} B; the ExecuTorch method allocator on a 32-bit core, an "
    "estimate (stack and application not counted)"
)


def runtime_overhead(pte: bytes) -> RuntimeOverhead:
    """Estimate the method-allocator bytes ``Method`` needs for ``forward`` on a 32-bit core.

    Mirrors what ExecuTorch's ``Method::init`` allocates: one ``EValue`` per value, a
    ``TensorImpl`` and a strides array per tensor (sizes and dim order point into the
    program), a boxed list (pointer array and unboxed copy) per list value, and per kernel
    call an argument pointer array, its span and the kernel's function pointer.
    """
    plan = forward_plan(pte)
    tensors = lists = 0
    for value in plan.values:
        if value.kind == "Tensor":
            tensors += TENSOR_IMPL_BYTES + 4 * len(value.payload.sizes)
        elif value.kind in ("IntList", "TensorList"):
            lists += 12 + 12 * len(value.payload)
        elif value.kind in ("DoubleList", "BoolList"):
            lists += 8 + 8 * len(value.payload)
    instructions = sum(POINTER_BYTES * len(call.args) + 12 for call in plan.instructions)
    return RuntimeOverhead(EVALUE_BYTES * len(plan.values), tensors, lists, instructions)


# --- what firmware needs to allocate and register ------------------------------------------


def planned_buffer_sizes(pte: bytes) -> list[int]:
    """Sizes of ``forward``'s memory-planned buffers, in the order ExecuTorch's
    ``MethodMeta::memory_planned_buffer_size(i)`` reports them (buffer 0 of the program is
    reserved and not listed)."""
    return [int(size) for size in forward_plan(pte).non_const_buffer_sizes[1:]]


def scratch_buffer_sizes(pte: bytes) -> list[int]:
    """Bytes of every CMSIS-NN scratch buffer ``forward`` passes to a kernel (the planned
    ``scratch`` out-argument of ``cortex_m_nn`` operators), in kernel-call order."""
    from cortex_m_nn.kernel_codegen import load_yaml

    scratch_position = {
        f"cortex_m_nn::{op.name}": [a.name for a in op.arguments].index("scratch")
        for op in load_yaml()[1]
        if "scratch" in [a.name for a in op.arguments]
    }
    plan = forward_plan(pte)
    sizes = []
    for call in plan.instructions:
        if call.kind != "KernelCall":
            continue
        position = scratch_position.get(plan.operators[call.op_index][0])
        if position is None:
            continue
        tensor = plan.values[call.args[position]].payload
        element = _ELEMENT_BYTES[tensor.scalar_type]
        sizes.append(element * math.prod(tensor.sizes))
    return sizes


def forward_io(pte: bytes) -> tuple[int, int]:
    """Number of inputs and outputs of ``forward``."""
    plan = forward_plan(pte)
    return len(plan.inputs), len(plan.outputs)
