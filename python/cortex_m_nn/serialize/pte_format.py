"""The flatbuffer of a serialised ExecuTorch program (``.pte``), read without ExecuTorch.

Importing ExecuTorch's own reader costs seconds (it pulls torch); ``cortex-m-compile embed``
runs at every firmware configure and only needs a few numbers. This reads the fields
:mod:`cortex_m_nn.serialize.pte` counts straight from the bytes with the ``flatbuffers`` package's
:class:`~flatbuffers.table.Table`, checking every position against the buffer's end.

The layout is ExecuTorch's ``program.fbs`` (file identifier ``ET12``): a table's field ``i``
has vtable slot ``4 + 2 * i``, and a union field takes two (its member's type, then the
member). Constants may sit outside the flatbuffer, in segments after it; an extended header
(``eh00`` after the identifier) then gives the flatbuffer's size and where segments start.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from flatbuffers import number_types as types
from flatbuffers.table import Table
from flatbuffers.util import BufferHasIdentifier

FILE_IDENTIFIER = b"ET12"
_HEADER_MAGIC = b"eh00"
_HEADER_MIN_LENGTH = 24  # magic, length, program size, segment base offset
_HEADER_READ_LENGTH = 32  # ... and the segment data size, which is not needed here
_OFFSET = types.UOffsetTFlags

#: Members of the ``KernelTypes`` union (an ``EValue``), by type number.
VALUE_KINDS = (
    "None",
    "Null",
    "Int",
    "Bool",
    "Double",
    "Tensor",
    "String",
    "IntList",
    "DoubleList",
    "BoolList",
    "TensorList",
    "OptionalTensorList",
)
#: Members of the ``InstructionArguments`` union, by type number.
INSTRUCTION_KINDS = ("None", "KernelCall", "DelegateCall", "MoveCall", "JumpFalseCall", "FreeCall")
#: Element type of each list value's ``items``.
_LIST_ITEMS = {
    "IntList": types.Int64Flags,
    "DoubleList": types.Float64Flags,
    "BoolList": types.BoolFlags,
    "TensorList": types.Int32Flags,
    "OptionalTensorList": types.Int32Flags,
}


class PteFormatError(ValueError):
    """The bytes are not a readable ExecuTorch program (corrupt, truncated or another file)."""


@dataclass(frozen=True)
class Tensor:
    """A tensor value: what the counts need of it."""

    scalar_type: int
    sizes: tuple[int, ...]
    data_buffer_idx: int
    #: Whether it has ``allocation_info`` (memory-planned), rather than constant or dynamic.
    planned: bool
    #: Whether its shape may change (``shape_dynamism`` not STATIC): the runtime then copies
    #: its sizes and dim order into the method allocator.
    dynamic: bool = False


@dataclass(frozen=True)
class Value:
    """An ``EValue``: ``kind`` names its union member; ``payload`` is a :class:`Tensor`, a
    Python scalar or string, a tuple of a list's items, or None (``Null``, ``None``)."""

    kind: str
    payload: Any


@dataclass(frozen=True)
class Instruction:
    """An instruction: ``args`` are value indices (``KernelCall``, ``DelegateCall``)."""

    kind: str
    op_index: int = 0
    args: tuple[int, ...] = ()


@dataclass(frozen=True)
class ExecutionPlan:
    """A method; ``instructions`` are its chains' instructions, chain after chain."""

    name: str
    values: tuple[Value, ...]
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]
    instructions: tuple[Instruction, ...]
    operators: tuple[tuple[str, str], ...]  # (name, overload)
    non_const_buffer_sizes: tuple[int, ...]
    #: instructions per chain, in order (``instructions`` holds them all, chain after chain)
    chains: tuple[int, ...] = ()
    #: delegates the plan calls (backends; cortex-m-nn writes none)
    delegates: int = 0


@dataclass(frozen=True)
class Program:
    """A serialised program: its methods and the bytes its constants take."""

    plans: tuple[ExecutionPlan, ...]
    #: Bytes of the constant buffers (each with its alignment padding), inline or in a segment.
    constant_storage_bytes: int


class _Table:
    """A flatbuffer table whose every read is checked against the end of the buffer."""

    def __init__(self, data: bytes, pos: int, what: str) -> None:
        self.data, self.what = data, what
        _need(data, pos, 4, what)
        self.table = Table(data, pos)
        vtable = pos - self.table.Get(types.SOffsetTFlags, pos)
        _need(data, vtable, 4, f"{what}'s vtable")
        _need(data, vtable, self.table.Get(types.VOffsetTFlags, vtable), f"{what}'s vtable")

    def _field(self, index: int) -> int:
        """Absolute position of field ``index``, or 0 when it is absent (its default)."""
        offset = self.table.Offset(4 + 2 * index)
        return self.table.Pos + offset if offset else 0

    def scalar(self, index: int, flags: type, default: Any = 0) -> Any:
        pos = self._field(index)
        if not pos:
            return default
        _need(self.data, pos, flags.bytewidth, f"{self.what} field {index}")
        return self.table.Get(flags, pos)

    def _target(self, index: int, what: str = "") -> int:
        """Position of what field ``index`` (an offset) points to, or 0 when absent."""
        pos = self._field(index)
        if not pos:
            return 0
        what = what or f"{self.what} field {index}"
        _need(self.data, pos, 4, what)
        target = self.table.Indirect(pos)
        _need(self.data, target, 4, what)
        return target

    def _vector(self, index: int, width: int, what: str = "") -> tuple[int, int]:
        """Start and length of vector field ``index`` of ``width``-byte elements."""
        target = self._target(index, what)
        if not target:
            return 0, 0
        length = self.table.Get(_OFFSET, target)
        _need(self.data, target + 4, length * width, what or f"{self.what} field {index}")
        return target + 4, length

    def length(self, index: int, width: int = 1) -> int:
        """Number of elements of vector field ``index`` (0 when absent)."""
        return self._vector(index, width)[1]

    def string(self, index: int) -> str:
        start, length = self._vector(index, 1)
        try:
            return bytes(self.data[start : start + length]).decode()
        except UnicodeDecodeError as error:
            raise PteFormatError(f"{self.what} field {index} is not UTF-8 text") from error

    def table_at(self, index: int, what: str) -> _Table | None:
        target = self._target(index, what)
        return _Table(self.data, target, what) if target else None

    def tables(self, index: int, what: str) -> list[_Table]:
        start, length = self._vector(index, 4, f"the {what} list")
        return [
            _Table(self.data, self.table.Indirect(p), what) for p in _positions(start, length, 4)
        ]

    def scalars(self, index: int, flags: type) -> tuple[Any, ...]:
        start, length = self._vector(index, flags.bytewidth)
        return tuple(self.table.Get(flags, p) for p in _positions(start, length, flags.bytewidth))

    def union(self, index: int, kinds: tuple[str, ...]) -> tuple[str, _Table | None]:
        """The member of the union at field ``index`` (type, then value): kind and table."""
        number = self.scalar(index, types.Uint8Flags)
        if number >= len(kinds):
            raise PteFormatError(f"{self.what} has an unknown union member {number}")
        return kinds[number], self.table_at(index + 1, kinds[number])


def _positions(start: int, length: int, width: int) -> range:
    return range(start, start + length * width, width)


def _need(data: bytes, pos: int, size: int, what: str) -> None:
    if pos < 0 or size < 0 or pos + size > len(data):
        raise PteFormatError(
            f"{what} at byte {pos} lies outside the program's {len(data)} bytes "
            "(truncated or corrupt)"
        )


def _tensor(table: _Table) -> Tensor:
    # Tensor: scalar_type 0, storage_offset 1, sizes 2, dim_order 3, requires_grad 4,
    # data_buffer_idx 5, allocation_info 6, layout 7, shape_dynamism 8 (0: STATIC).
    return Tensor(
        scalar_type=table.scalar(0, types.Int8Flags),
        sizes=table.scalars(2, types.Int32Flags),
        data_buffer_idx=table.scalar(5, types.Uint32Flags),
        planned=table.table_at(6, "allocation info") is not None,
        dynamic=table.scalar(8, types.Uint8Flags) != 0,
    )


def _value(table: _Table) -> Value:
    kind, member = table.union(0, VALUE_KINDS)
    if kind in ("None", "Null"):
        return Value(kind, None)
    if member is None:
        raise PteFormatError(f"a {kind} value has no contents")
    if kind == "Tensor":
        return Value(kind, _tensor(member))
    if kind == "String":
        return Value(kind, member.string(0))
    if kind in _LIST_ITEMS:
        return Value(kind, member.scalars(0, _LIST_ITEMS[kind]))
    flags = {"Int": types.Int64Flags, "Bool": types.BoolFlags, "Double": types.Float64Flags}
    return Value(kind, member.scalar(0, flags[kind], flags[kind].py_type(0)))


def _instruction(table: _Table) -> Instruction:
    kind, call = table.union(0, INSTRUCTION_KINDS)
    if call is None or kind not in ("KernelCall", "DelegateCall"):
        return Instruction(kind)
    # KernelCall: op_index 0, args 1; DelegateCall: delegate_index 0, args 1.
    op_index = call.scalar(0, types.Int32Flags) if kind == "KernelCall" else 0
    return Instruction(kind, op_index, call.scalars(1, types.Int32Flags))


def _plan(table: _Table) -> ExecutionPlan:
    # ExecutionPlan: name 0, container_meta_type 1, values 2, inputs 3, outputs 4, chains 5,
    # operators 6, delegates 7, non_const_buffer_sizes 8. Chain: instructions 2.
    # Operator: name 0, overload 1.
    chains = [tuple(chain.tables(2, "instruction")) for chain in table.tables(5, "chain")]
    return ExecutionPlan(
        name=table.string(0),
        values=tuple(_value(value) for value in table.tables(2, "value")),
        inputs=table.scalars(3, types.Int32Flags),
        outputs=table.scalars(4, types.Int32Flags),
        instructions=tuple(_instruction(i) for chain in chains for i in chain),
        operators=tuple((op.string(0), op.string(1)) for op in table.tables(6, "operator")),
        non_const_buffer_sizes=table.scalars(8, types.Int64Flags),
        chains=tuple(len(chain) for chain in chains),
        delegates=len(table.tables(7, "delegate")),
    )


def _extended_header(data: bytes) -> tuple[int, int]:
    """The flatbuffer's size and where segments start (0: none), from the extended header
    that follows the root offset and file identifier; the whole file when there is none.
    A file shorter than its header says is truncated."""
    header = data[8 : 8 + _HEADER_READ_LENGTH]
    length = int.from_bytes(header[4:8], "little")
    if (
        len(header) < _HEADER_READ_LENGTH
        or header[:4] != _HEADER_MAGIC
        or length < _HEADER_MIN_LENGTH
    ):
        return len(data), 0
    size, base = int.from_bytes(header[8:16], "little"), int.from_bytes(header[16:24], "little")
    segments = int.from_bytes(header[24:32], "little") if length > _HEADER_MIN_LENGTH else 0
    end = max(size, base + segments if base else 0)
    if end > len(data):
        raise PteFormatError(
            f"the file has {len(data)} bytes where its header gives {end}: truncated"
        )
    return size, base


def _constant_storage_bytes(root: _Table, segment_data: bytes | None) -> int:
    """Bytes of the constant buffers: inline ``constant_buffer`` entries, or the slices of
    the constant segment its offsets cut (each to the next offset, the last to the end)."""
    # Program: constant_buffer 2, segments 4, constant_segment 5. DataSegment: offset 0,
    # size 1. SubsegmentOffsets: segment_index 0, offsets 1. Buffer: storage 0.
    segments = []
    for number, segment in enumerate(root.tables(4, "segment") if segment_data is not None else ()):
        start, size = segment.scalar(0, types.Uint64Flags), segment.scalar(1, types.Uint64Flags)
        if start + size > len(segment_data):
            raise PteFormatError(
                f"segment {number} ({size} bytes at {start}) ends past the end of the file "
                f"({len(segment_data)} bytes of segments): truncated"
            )
        segments.append(size)
    constant_segment = root.table_at(5, "constant segment")
    offsets = constant_segment.scalars(1, types.Uint64Flags) if constant_segment else ()
    if segment_data is None or not offsets:
        return sum(buffer.length(0) for buffer in root.tables(2, "constant buffer"))
    index = constant_segment.scalar(0, types.Uint32Flags)
    if index >= len(segments):
        raise PteFormatError(f"the constant segment {index} is not among the segments")
    ends = [*offsets[1:], segments[index]]
    return sum(
        len(range(segments[index])[start:end]) for start, end in zip(offsets, ends, strict=True)
    )


def read_program(data: bytes) -> Program:
    """Read the execution plans and constant storage of a serialised program; raises
    :class:`PteFormatError` when ``data`` is not one."""
    if len(data) < 8:
        raise PteFormatError(f"{len(data)} bytes are too few for an ExecuTorch program")
    if not BufferHasIdentifier(data, 0, FILE_IDENTIFIER):
        found = bytes(data[4:8])
        raise PteFormatError(
            f"not an ExecuTorch program (file identifier {found!r}, expected {FILE_IDENTIFIER!r})"
        )
    program_size, segment_base = _extended_header(data)
    flatbuffer = data[:program_size]
    _need(flatbuffer, 0, 4, "the root offset")
    root = _Table(flatbuffer, int.from_bytes(flatbuffer[:4], "little"), "program")
    # Program: version 0, execution_plan 1.
    return Program(
        plans=tuple(_plan(plan) for plan in root.tables(1, "execution plan")),
        constant_storage_bytes=_constant_storage_bytes(
            root, data[segment_base:] if segment_base else None
        ),
    )
