"""Program images (``docs/program-image.md``): what ``cortex-m-compile embed --image`` writes,
read back by the Python reader and by the firmware's ``check_image``
(``src/program_image.cpp``, built for the host with AddressSanitizer and UndefinedBehavior-
Sanitizer), which must refuse every truncated, bit-flipped, incompatible or too large image
with the right reason and never read outside it."""

from __future__ import annotations

import random
import shutil
import struct
import subprocess
import zlib
from pathlib import Path

import pytest
import torch
from tests.python import models
from tests.python.test_program_io import two_heads

from cortex_m_nn.core.errors import CompileError
from cortex_m_nn.core.options import IoType
from cortex_m_nn.core.target import Target
from cortex_m_nn.embed import program_image
from cortex_m_nn.embed.pte_source import model_facts
from cortex_m_nn.frontend.calibration import synthetic
from cortex_m_nn.frontend.model_source import ModelSource
from cortex_m_nn.pipeline import compile_model

REPO = Path(__file__).resolve().parents[2]
#: Damaged copies per kind the firmware's check sees.
DAMAGED = 120


def _compile(name: str, factory, io: IoType) -> bytes:  # noqa: ANN001
    module, example = factory()
    source = ModelSource(name, module, example)
    compiled = compile_model(
        source, Target.parse("cortex-m55"), synthetic(example, count=4), progress=False, io=io
    )
    return compiled.pte


@pytest.fixture(scope="module")
def programs() -> dict[str, bytes]:
    """Two programs: float I/O, and int8 I/O with two inputs and two outputs."""
    return {
        "conv_stack": _compile("conv_stack", models.conv_stack, IoType.FLOAT),
        "two_heads": _compile("two_heads", two_heads, IoType.INT8),
    }


@pytest.mark.parametrize("name", ["conv_stack", "two_heads"])
def test_the_header_records_what_the_program_needs(programs: dict[str, bytes], name: str) -> None:
    pte = programs[name]
    facts = model_facts(pte)
    image = program_image.image_bytes(pte, facts)
    header = program_image.read_header(image)
    assert program_image.program_of(image) == pte
    assert header.program_offset % 16 == 0
    assert (header.isa, header.rounding, header.ops_version) == ("mve", "double", facts.ops_version)
    assert header.arena_bytes == facts.arena_bytes
    assert header.method_allocator_bytes == facts.method_allocator_bytes
    assert header.temp_allocator_bytes == facts.load_temp_bytes
    assert header.planned_buffers == len(facts.planned_buffers)
    assert header.cases == (*facts.cases, *facts.prim_operators)
    assert len(header.inputs) == facts.inputs and len(header.outputs) == facts.outputs
    for read, spec in zip(
        (*header.inputs, *header.outputs), (*facts.input_specs, *facts.output_specs), strict=True
    ):
        assert (read is None) == (spec is None)
        if spec is not None and read is not None:
            assert read.zero_point == spec.zero_point
            assert read.scale == struct.unpack("<f", struct.pack("<f", spec.scale))[0]


def test_the_python_reader_refuses_damage(programs: dict[str, bytes]) -> None:
    pte = programs["conv_stack"]
    image = program_image.image_bytes(pte, model_facts(pte))
    for damaged in (image[:200], image[:-1], _flip(image, 3), _flip(image, 300), _flip(image, -9)):
        with pytest.raises(program_image.ImageError):
            program_image.read_header(damaged)


def test_a_program_with_fallbacks_has_no_image() -> None:
    """Only a fully lowered program runs from an image (no portable kernels to register)."""
    from tests.python.test_program_io import DivisionIn

    module, example = DivisionIn().eval(), (torch.randn(1, 8),)
    compiled = compile_model(
        ModelSource("division", module, example),
        Target.parse("cortex-m55"),
        synthetic(example, count=2),
        progress=False,
        allow_fallback=True,
    )
    with pytest.raises(CompileError, match="fully lowered"):
        program_image.image_bytes(compiled.pte, model_facts(compiled.pte))


def _flip(image: bytes, position: int, bit: int = 0) -> bytes:
    damaged = bytearray(image)
    damaged[position] ^= 1 << bit
    return bytes(damaged)


def _resealed(image: bytes, offset: int, value: bytes) -> bytes:
    """``image`` with ``value`` written at ``offset`` of its header and the header CRC made
    right again: a well-formed image whose fields say something else."""
    header = program_image.read_header(image)
    changed = bytearray(image)
    changed[offset : offset + len(value)] = value
    changed[12:16] = b"\0\0\0\0"
    crc = zlib.crc32(bytes(changed[: header.program_offset]))
    changed[12:16] = struct.pack("<I", crc)
    return bytes(changed)


@pytest.fixture(scope="module")
def checker(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``tests/host/check_image.cpp`` with ``src/program_image.cpp``, sanitized."""
    compiler = shutil.which("c++") or shutil.which("g++")
    if compiler is None:
        pytest.skip("no host C++ compiler (c++ or g++) on PATH: the firmware's check is C++")
    binary = tmp_path_factory.mktemp("check_image") / "check_image"
    command = [
        compiler, "-std=c++17", "-O1", "-g", "-Wall", "-Wextra", "-Werror",
        "-fsanitize=address,undefined", "-fno-sanitize-recover=all",
        f"-I{REPO / 'include'}", str(REPO / "src" / "program_image.cpp"),
        str(REPO / "tests" / "host" / "check_image.cpp"), "-o", str(binary),
    ]  # fmt: skip
    subprocess.run(command, check=True, capture_output=True, text=True)
    return binary


def _limits(header: program_image.ImageHeader, **changes: object) -> list[str]:
    limits = {
        "ops": header.ops_version,
        "isa": program_image.ISA_CODES[header.isa],
        "rounding": program_image.ROUNDING_CODES[header.rounding],
        "arena": header.arena_bytes,
        "method": header.method_allocator_bytes,
        "temp": header.temp_allocator_bytes,
        "cases": ",".join(header.cases),
    }
    limits.update(changes)
    return [str(v) for v in limits.values()]


def _check(checker: Path, limits: list[str], images: list[bytes], directory: Path) -> list[str]:
    paths = []
    for i, image in enumerate(images):
        path = directory / f"{i}.cmnn"
        path.write_bytes(image)
        paths.append(str(path))
    result = subprocess.run(
        [str(checker), *limits, *paths], capture_output=True, text=True, timeout=600
    )
    assert result.returncode == 0, result.stderr[-2000:]  # a sanitizer report fails here
    lines = result.stdout.splitlines()
    assert len(lines) == len(images)
    return lines


def test_the_firmware_reads_the_header_the_compiler_wrote(
    checker: Path, programs: dict[str, bytes], tmp_path: Path
) -> None:
    for pte in programs.values():
        image = program_image.image_bytes(pte, model_facts(pte))
        header = program_image.read_header(image)
        (line,) = _check(checker, _limits(header), [image], tmp_path)
        fields = line.split("|")
        assert fields[0] == "ok", line
        numbers = [int(v) for v in fields[1:13]]
        assert numbers == [
            header.program_offset, header.program_bytes, header.ops_version,
            program_image.ISA_CODES[header.isa], program_image.ROUNDING_CODES[header.rounding],
            len(header.inputs), len(header.outputs), header.arena_bytes,
            header.method_allocator_bytes, header.temp_allocator_bytes, header.planned_buffers,
            len(header.cases),
        ]  # fmt: skip
        for text, spec in zip(fields[13:], header.inputs, strict=False):
            flag, scale, zero_point = text.split(":")
            assert flag == ("0" if spec is None else "1")
            if spec is not None:
                as_float32 = struct.unpack("<f", struct.pack("<f", float(scale)))[0]
                assert (as_float32, int(zero_point)) == (spec.scale, spec.zero_point)


def test_the_firmware_refuses_each_damage_with_its_reason(
    checker: Path, programs: dict[str, bytes], tmp_path: Path
) -> None:
    """Truncated and bit-flipped copies (never accepted, never read past), then well-formed
    images the firmware cannot run: each refused with its reason in one line."""
    pte = programs["two_heads"]
    image = program_image.image_bytes(pte, model_facts(pte))
    header = program_image.read_header(image)
    rng = random.Random(7)
    truncated = [image[: rng.randrange(len(image))] for _ in range(DAMAGED)]
    head = [_flip(image, rng.randrange(header.program_offset), rng.randrange(8))]
    head += [_flip(image, rng.randrange(header.program_offset), rng.randrange(8))
             for _ in range(DAMAGED - 1)]  # fmt: skip
    body = [
        _flip(image, header.program_offset + rng.randrange(header.program_bytes), rng.randrange(8))
        for _ in range(DAMAGED)
    ]
    lines = _check(checker, _limits(header), truncated + head + body, tmp_path)
    statuses = [line.split("|")[0] for line in lines]
    assert set(statuses[:DAMAGED]) <= {"truncated"}
    assert set(statuses[DAMAGED : 2 * DAMAGED]) <= {
        "not an image",
        "other format",
        "header damaged",
        "truncated",
    }  # fmt: skip  (a flipped offset or size can point past the end)
    assert set(statuses[2 * DAMAGED :]) == {"program damaged"}
    refused = {
        "compiled for other kernels": (image, _limits(header, isa=1)),
        "missing kernel": (image, _limits(header, cases=",".join(header.cases[1:]))),
        "too large": (image, _limits(header, arena=header.arena_bytes - 1)),
        "other format": (_resealed(image, 8, struct.pack("<H", 2)), _limits(header)),
        "header damaged": (
            _resealed(image, 16, struct.pack("<I", header.program_offset - 8)),
            _limits(header),
        ),  # fmt: skip
    }
    for status, (candidate, limits) in refused.items():
        (line,) = _check(checker, limits, [candidate], tmp_path)
        assert line.split("|")[0] == status, line
        assert line.split("|")[1].strip(), line  # the one line saying why


def test_embed_writes_the_image_or_nothing(
    programs: dict[str, bytes], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``cortex-m-compile embed --image``: the image of the program; without an output, or for a
    program with fallbacks, one line on stderr, a non-zero exit and no file."""
    from cortex_m_nn.cli import main as cli

    pte = tmp_path / "conv_stack.pte"
    pte.write_bytes(programs["conv_stack"])
    image = tmp_path / "out" / "conv_stack.cmnn"
    assert cli.main(["embed", str(pte), "--image", str(image), "-q"]) == 0
    assert program_image.program_of(image.read_bytes()) == programs["conv_stack"]
    capsys.readouterr()
    assert cli.main(["embed", str(pte)]) == 2
    err = capsys.readouterr().err.splitlines()
    assert err == ["cortex-m-compile embed: error: embed writes --output-dir DIR, --image FILE or "
                   "both: give one"]  # fmt: skip


def test_embed_refuses_an_image_larger_than_its_partition(
    programs: dict[str, bytes], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``embed --image --partition-size``: an image that fits is written; one that does not is
    one line, exit 2, nothing written; the size alone (without --image) is refused."""
    from cortex_m_nn.cli import main as cli

    pte = tmp_path / "conv_stack.pte"
    pte.write_bytes(programs["conv_stack"])
    image = tmp_path / "conv_stack.cmnn"
    size = len(
        program_image.image_bytes(programs["conv_stack"], model_facts(programs["conv_stack"]))
    )
    fits = ["embed", str(pte), "--image", str(image), "--partition-size", str(size), "-q"]
    assert cli.main(fits) == 0 and image.stat().st_size == size
    image.unlink()
    capsys.readouterr()
    small = ["embed", str(pte), "--image", str(image), "--partition-size", str(size - 1)]
    assert cli.main(small) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert f"the program image is {size:,} B, larger than the partition" in line
    assert not image.exists()
    assert (
        cli.main(["embed", str(pte), "--output-dir", str(tmp_path), "--partition-size", "1M"]) == 2
    )
    assert "give --image FILE too" in capsys.readouterr().err
