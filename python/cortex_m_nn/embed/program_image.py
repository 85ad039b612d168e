"""A program image: a ``.pte`` with everything firmware must check before it loads the program
from any memory (a flash partition, a file, an array), in one file (``docs/program-image.md``).

The image is a 256-byte header, the names of the kernel cases the program calls, and the
``.pte``, 16-byte aligned. The header records the operator ABI the program was compiled for,
the memory it needs (planned arena, method and temporary allocators), each input's and
output's type and quantization, and a CRC-32 of the header (with the case names) and one of
the program: firmware
(``include/cortex_m_nn/program_image.h``) refuses a damaged, incompatible or too large image
before it touches the memory of the model in service. Little-endian throughout; CRC-32 is
IEEE 802.3's (``zlib.crc32``).
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass

from cortex_m_nn.core.errors import CompileError
from cortex_m_nn.embed.pte_source import MODEL_ALIGNMENT, ModelFacts
from cortex_m_nn.serialize.io_spec import IoQuantization

MAGIC = b"CMNNPROG"
FORMAT_VERSION = 1
HEADER_BYTES = 256
#: Inputs and outputs a header records (the firmware API's limit).
MAX_IO = 8
#: ISA and rounding codes (``kernels/include/cortex_m_nn/abi.h``).
ISA_CODES = {"scalar": 0, "dsp": 1, "mve": 2}
ROUNDING_CODES = {"double": 0, "single": 1}

#: The fixed fields, in order (``docs/program-image.md`` gives their offsets).
_FIELDS = struct.Struct("<8sHHIIIIIBBBBIIIHHI8x")
_FLAGS = struct.Struct(f"<{MAX_IO}B{MAX_IO}B")
_SCALES = struct.Struct(f"<{MAX_IO}f{MAX_IO}f")
_ZERO_POINTS = struct.Struct(f"<{MAX_IO}i{MAX_IO}i")
#: Where the header CRC-32 lies (zero while it is computed).
_HEADER_CRC = slice(12, 16)


@dataclass(frozen=True)
class ImageHeader:
    """The header's fields, as :func:`read_header` reads them."""

    program_offset: int
    program_bytes: int
    program_crc: int
    ops_version: int
    isa: str
    rounding: str
    arena_bytes: int
    method_allocator_bytes: int
    temp_allocator_bytes: int
    planned_buffers: int
    cases: tuple[str, ...]
    inputs: tuple[IoQuantization | None, ...]
    outputs: tuple[IoQuantization | None, ...]


def _aligned(nbytes: int) -> int:
    return -(-nbytes // MODEL_ALIGNMENT) * MODEL_ALIGNMENT


def _io(specs: tuple[IoQuantization | None, ...]) -> tuple[list[int], list[float], list[int]]:
    pad = [None] * (MAX_IO - len(specs))
    flags = [0 if s is None else 1 for s in (*specs, *pad)]
    scales = [0.0 if s is None else s.scale for s in (*specs, *pad)]
    zero_points = [0 if s is None else s.zero_point for s in (*specs, *pad)]
    return flags, scales, zero_points


def image_bytes(pte: bytes, facts: ModelFacts) -> bytes:
    """The program image of ``pte`` (whose facts are ``facts``). A program the firmware could
    not load from an image is a :class:`CompileError` naming the fix."""
    if facts.fallback_operators:
        raise CompileError(
            f"a program image holds a fully lowered program; this one calls "
            f"{', '.join(facts.fallback_operators)}: compile the model without fallbacks"
        )
    if facts.inputs > MAX_IO or facts.outputs > MAX_IO:
        raise CompileError(
            f"the program has {facts.inputs} inputs and {facts.outputs} outputs; a program "
            f"image records at most {MAX_IO} of each"
        )
    names = (*facts.cases, *facts.prim_operators)
    cases = b"".join(name.encode() + b"\0" for name in names)
    offset = _aligned(HEADER_BYTES + len(cases))
    fields = _FIELDS.pack(
        MAGIC, FORMAT_VERSION, HEADER_BYTES, 0, offset, len(pte), zlib.crc32(pte),
        facts.ops_version, ISA_CODES[facts.isa], ROUNDING_CODES[facts.rounding],
        facts.inputs, facts.outputs, facts.arena_bytes, facts.method_allocator_bytes,
        facts.load_temp_bytes, len(facts.planned_buffers), len(names), len(cases),
    )  # fmt: skip
    inputs, outputs = _io(facts.input_specs), _io(facts.output_specs)
    io = (
        _FLAGS.pack(*inputs[0], *outputs[0])
        + _SCALES.pack(*inputs[1], *outputs[1])
        + _ZERO_POINTS.pack(*inputs[2], *outputs[2])
    )
    head = bytearray((fields + io).ljust(HEADER_BYTES, b"\0") + cases)
    head = head.ljust(offset, b"\0")
    head[_HEADER_CRC] = struct.pack("<I", zlib.crc32(bytes(head)))
    return bytes(head) + pte


def require_fits(image: bytes, partition_bytes: int, what: str, partition: str = "") -> None:
    """``image`` fits the flash partition it is written into (``partition``: its label, for
    the message), else a :class:`CompileError` naming the sizes."""
    from cortex_m_nn.plan.boards import format_size

    if len(image) > partition_bytes:
        label = f" '{partition}'" if partition else ""
        raise CompileError(
            f"{what} is {len(image):,} B, larger than the partition{label} "
            f"({format_size(partition_bytes)}): enlarge the partition, or make the model smaller"
        )


class ImageError(ValueError):
    """An image :func:`read_header` refuses (truncated, damaged, another format)."""


def read_header(image: bytes) -> ImageHeader:
    """The header of ``image``, checked as the firmware checks it (both CRCs, the offsets).
    Raises :class:`ImageError` with the reason."""
    if len(image) < HEADER_BYTES:
        raise ImageError(f"{len(image)} bytes: shorter than the {HEADER_BYTES}-byte header")
    fixed = _FIELDS.unpack_from(image)
    magic, version, header_bytes, crc, offset, size, program_crc = fixed[:7]
    if magic != MAGIC:
        raise ImageError("not a program image (no CMNNPROG magic)")
    if version != FORMAT_VERSION or header_bytes != HEADER_BYTES:
        raise ImageError(f"format {version} ({header_bytes}-byte header), not {FORMAT_VERSION}")
    if offset + size > len(image):
        raise ImageError(f"the program ({size} B at {offset}) lies outside the {len(image)} B")
    blank = bytearray(image[:offset])
    blank[_HEADER_CRC] = b"\0\0\0\0"
    if offset < HEADER_BYTES or zlib.crc32(bytes(blank)) != crc:
        raise ImageError("the header is damaged (its CRC-32 differs)")
    ops, isa, rounding, inputs, outputs, arena, method, temp, buffers, count, names = fixed[7:]
    if offset % MODEL_ALIGNMENT or offset < HEADER_BYTES + names:
        raise ImageError("the header's program offset and kernel list disagree")
    if zlib.crc32(image[offset : offset + size]) != program_crc:
        raise ImageError("the program is damaged (its CRC-32 differs)")
    table = image[HEADER_BYTES : HEADER_BYTES + names].split(b"\0")[:-1]
    if len(table) != count or inputs > MAX_IO or outputs > MAX_IO:
        raise ImageError("the header's case table or input/output counts disagree")
    flags = _FLAGS.unpack_from(image, _FIELDS.size)
    scales = _SCALES.unpack_from(image, _FIELDS.size + _FLAGS.size)
    zero_points = _ZERO_POINTS.unpack_from(image, _FIELDS.size + _FLAGS.size + _SCALES.size)

    def specs(first: int, count: int) -> tuple[IoQuantization | None, ...]:
        return tuple(
            IoQuantization(scales[i], zero_points[i], ()) if flags[i] else None
            for i in range(first, first + count)
        )

    return ImageHeader(
        offset, size, program_crc, ops,
        {v: k for k, v in ISA_CODES.items()}.get(isa, f"isa {isa}"),
        {v: k for k, v in ROUNDING_CODES.items()}.get(rounding, f"rounding {rounding}"),
        arena, method, temp, buffers, tuple(n.decode() for n in table),
        specs(0, inputs), specs(MAX_IO, outputs),
    )  # fmt: skip


def program_of(image: bytes) -> bytes:
    """The ``.pte`` an image holds (its header checked)."""
    header = read_header(image)
    return image[header.program_offset : header.program_offset + header.program_bytes]
