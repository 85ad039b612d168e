"""Read a serialised ExecuTorch program (``.pte``): operators, planned and constant bytes,
the ``cortex_m_nn_*`` metadata methods and an estimate of the runtime's own RAM.

Everything here works from the bytes alone, so the compile report, ``inspect`` (a ``.pte``
found inside a firmware ELF) and the benchmarks (the peer's ``.pte``) count the same way.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

from cortex_m_nn.core.abi import METADATA_METHOD, METADATA_PREFIX, ProgramAbi, decode_metadata
from cortex_m_nn.core.runtime_sizes import (
    ARRAY_REF_BYTES,
    BACKEND_DELEGATE_BYTES,
    BOXED_LIST_BYTES,
    CHAIN_BYTES,
    EVALUE_BYTES,
    PLATFORM_ALLOCATOR_BYTES,
    POINTER_BYTES,
    SPAN_BYTES,
    TEMP_BYTES_PER_ARGUMENT,
    TENSOR_IMPL_BYTES,
    TENSOR_META_BYTES,
)
from cortex_m_nn.serialize.pte_format import ExecutionPlan, Program, PteFormatError, read_program

__all__ = ["METADATA_METHOD", "METADATA_PREFIX", "PteFormatError", "pte_abi", "pte_metadata"]


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
    """The ``cortex_m_nn_*`` records (core, isa, rounding, version, ops_version, I/O) by name,
    as text, from the program's :data:`METADATA_METHOD`."""
    for plan in _program(pte).plans:
        if plan.name == METADATA_METHOD and len(plan.outputs) == 1:
            value = plan.values[plan.outputs[0]]
            if value.kind == "String":
                return decode_metadata(value.payload)
    return {}


def pte_abi(pte: bytes) -> ProgramAbi:
    """The kernel ABI (with the core) a .pte was compiled for; KeyError if it records none."""
    return ProgramAbi.from_metadata(pte_metadata(pte))


# --- runtime overhead ----------------------------------------------------------------------


class _Bump:
    """ExecuTorch's ``MemoryAllocator``: each allocation starts at the next multiple of its
    alignment (the pool itself is aligned) and ends ``size`` bytes later."""

    def __init__(self) -> None:
        self.used = 0

    def take(self, size: int, alignment: int = POINTER_BYTES) -> int:
        """Bytes the allocation takes, its padding included."""
        before = self.used
        self.used = -(-before // alignment) * alignment + size
        return self.used - before


@dataclass(frozen=True)
class RuntimeOverhead:
    """Bytes ExecuTorch's ``Method::load`` takes from its method allocator for ``forward``,
    by what they hold (alignment padding counted where it falls)."""

    values: int
    tensors: int
    lists: int
    instructions: int
    fixed: int

    @property
    def total(self) -> int:
        return self.values + self.tensors + self.lists + self.instructions + self.fixed


#: How the count is made, for the report.
RUNTIME_OVERHEAD_FORMULA = (
    "ExecuTorch's Method::load replayed on a 32-bit core, allocation by allocation with its "
    f"alignment: {EVALUE_BYTES} B per value; per tensor a {TENSOR_IMPL_BYTES} B TensorImpl and "
    "4 B strides per dimension; per list its boxed and unboxed items; per chain and kernel call "
    "its kernel pointer, argument span and pointers (each call's TensorMeta list goes to the "
    f"load-time temporary allocator, {TEMP_BYTES_PER_ARGUMENT} B per argument of the call "
    "with the most)"
)


def load_temp_bytes(pte: bytes) -> int:
    """The temporary allocator with which ``Method::load`` of ``forward`` puts no kernel
    lookup's ``TensorMeta`` list in the method allocator: ``resolve_operator`` uses one only
    when it holds ``TEMP_BYTES_PER_ARGUMENT`` per argument, and empties it after each call.
    The runner and the Zephyr module give ``forward`` one of this size (at least)."""
    return _load_temp_bytes(forward_plan(pte))


def _load_temp_bytes(plan: ExecutionPlan) -> int:
    calls = [c for c in plan.instructions if c.kind == "KernelCall"]
    return max((TEMP_BYTES_PER_ARGUMENT * len(c.args) for c in calls), default=0)


def runtime_overhead(pte: bytes, temp_bytes: int | None = None) -> RuntimeOverhead:
    """What ``Method::load`` of ``forward`` allocates from the method allocator on a 32-bit
    core given a temporary allocator of ``temp_bytes`` (default :func:`load_temp_bytes`, as
    the runner and the Zephyr module give it; 0: none): the allocations of ExecuTorch's
    ``Method::load``/``init``, ``parse_values``, ``parseTensor``, ``parseTensorList`` and
    ``resolve_operator``, in their order, each at its alignment. ``tests/target`` compares it
    with what the runtime reports it used."""
    plan = forward_plan(pte)
    temp_bytes = _load_temp_bytes(plan) if temp_bytes is None else temp_bytes
    bump = _Bump()
    parts = dict.fromkeys(("values", "tensors", "lists", "instructions", "fixed"), 0)
    # Method::load: without a temporary allocator, a PlatformMemoryAllocator stands in;
    # init: the values, the delegate array, the chains
    if temp_bytes == 0:
        parts["fixed"] += bump.take(PLATFORM_ALLOCATOR_BYTES)
    parts["values"] += bump.take(EVALUE_BYTES * len(plan.values), 8)
    if plan.inputs:
        parts["values"] += bump.take(len(plan.inputs), 1)  # input_set_
    for value in plan.values:
        items = value.payload
        if value.kind == "Tensor":
            rank = len(items.sizes)
            if items.dynamic:  # sizes and dim order copied out of the program
                parts["tensors"] += bump.take(4 * rank) + bump.take(rank, 1)
            parts["tensors"] += bump.take(4 * rank) + bump.take(TENSOR_IMPL_BYTES)
        elif value.kind == "IntList":
            parts["lists"] += bump.take(POINTER_BYTES * len(items)) + bump.take(8 * len(items), 8)
            parts["lists"] += bump.take(BOXED_LIST_BYTES)
        elif value.kind in ("TensorList", "OptionalTensorList"):
            element = POINTER_BYTES if value.kind == "TensorList" else 8
            parts["lists"] += bump.take(element * len(items))
            parts["lists"] += bump.take(POINTER_BYTES * len(items))
            parts["lists"] += bump.take(BOXED_LIST_BYTES)
        elif value.kind in ("BoolList", "DoubleList", "String"):
            parts["lists"] += bump.take(ARRAY_REF_BYTES)
    # BackendDelegate holds 8-byte members: its array (empty here) is 8-aligned
    parts["fixed"] += bump.take(BACKEND_DELEGATE_BYTES * plan.delegates, 8)
    parts["fixed"] += bump.take(CHAIN_BYTES * len(plan.chains))
    calls = iter(plan.instructions)
    for length in plan.chains:
        parts["instructions"] += bump.take(POINTER_BYTES * length)  # kernels
        parts["instructions"] += bump.take(SPAN_BYTES * length)  # argument spans
        for _ in range(length):
            call = next(calls)
            if call.kind not in ("KernelCall", "DelegateCall"):
                continue
            parts["instructions"] += bump.take(POINTER_BYTES * len(call.args))
            in_temp = TEMP_BYTES_PER_ARGUMENT * len(call.args) <= temp_bytes
            if call.kind == "KernelCall" and not in_temp:  # resolve_operator's TensorMeta
                parts["instructions"] += bump.take(TENSOR_META_BYTES * len(call.args))
                for index in call.args:
                    if plan.values[index].kind == "Tensor":
                        rank = len(plan.values[index].payload.sizes)
                        parts["instructions"] += bump.take(rank, 1)
    return RuntimeOverhead(**parts)


# --- what firmware needs to allocate and register ------------------------------------------


def planned_buffer_sizes(pte: bytes) -> list[int]:
    """Sizes of ``forward``'s memory-planned buffers, in the order ExecuTorch's
    ``MethodMeta::memory_planned_buffer_size(i)`` reports them (buffer 0 of the program is
    reserved and not listed)."""
    return [int(size) for size in forward_plan(pte).non_const_buffer_sizes[1:]]


def scratch_buffer_sizes(pte: bytes) -> list[int]:
    """Bytes of every CMSIS-NN scratch buffer ``forward`` passes to a kernel (the planned
    ``scratch`` out-argument of ``cortex_m_nn`` operators), in kernel-call order."""
    from cortex_m_nn.core.operators import load_yaml

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
