"""Models as data under QEMU (docs/program-image.md): one firmware image with no model
embedded (``runner/loader.cpp``) loads two programs QEMU places outside it, each into a model of
its own memory, and runs them bit exact; it refuses, one line each, a program calling a kernel
the image does not link and a damaged image, and the first model keeps running its program."""

from __future__ import annotations

import re
import struct
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch

from cortex_m_nn.embed import program_image
from cortex_m_nn.embed.pte_source import model_facts

from . import harness

pytestmark = pytest.mark.skipif(harness.missing() is not None, reason=str(harness.missing()))

#: Where the slots start, per core: the board's large RAM (AN547 DDR; AN505 PSRAM), 4 MB each.
SLOT_BASE = {"m55": 0x61000000, "m33": 0x80000000}
SLOT_BYTES = 0x400000
#: A slot's test vector, after its image.
VECTOR_OFFSET = 0x380000
#: Program A (int8 inputs and outputs), program B (float), program C: calls the LSTM kernel,
#: which neither A nor B needs, so the image does not link it.
PROGRAMS = ("ds_cnn_int8_io", "kws_gru", "kws_lstm")


def vector_bytes(run: harness.ModelRun) -> bytes:
    """The loader's test vector: the inputs as the program takes them, the expected outputs."""
    tensors = [*run.inputs, *run.expected]
    blob = b"CMNNVEC1" + struct.pack("<II", len(run.inputs), len(run.expected))
    for tensor in tensors:
        data = tensor.contiguous().numpy().tobytes()
        blob += struct.pack("<I", len(data)) + data + b"\0" * (-len(data) % 4)
    return blob


def damaged(image: bytes) -> bytes:
    """``image`` with one bit of its program flipped."""
    header = program_image.read_header(image)
    changed = bytearray(image)
    changed[header.program_offset + header.program_bytes // 2] ^= 0x10
    return bytes(changed)


@dataclass(frozen=True)
class LoaderBuild:
    """The loader built for a core with its slots' contents, and beside it the embedded runner
    of programs A and B (``runner_<name>.elf``: the same programs linked into the image)."""

    build: Path
    places: dict[int, Path]
    names: tuple[str, str]


def build_loader(core: harness.Core, root: Path) -> LoaderBuild:
    """Compile the three programs for ``core``, build the loader (linking A's and B's cases)
    and the embedded runners of A and B, and write the four slots and two vectors."""
    runs = [harness.compile_for(name, core) for name in PROGRAMS]
    images = [program_image.image_bytes(r.compiled.pte, model_facts(r.compiled.pte)) for r in runs]
    headers = [program_image.read_header(image) for image in images]
    a, b = headers[0], headers[1]
    cases = sorted(set(a.cases) | set(b.cases))
    assert "lstm.int8" in headers[2].cases and "lstm.int8" not in cases
    # A and B as embedded runners too, in the directory the runner's build needs
    harness.write_model(runs[0], root / "models")
    harness.write_model(runs[1], root / "models")
    definitions = [
        f"LOADER_ARENA_BYTES={max(a.arena_bytes, b.arena_bytes)}",
        f"LOADER_METHOD_BYTES={max(a.method_allocator_bytes, b.method_allocator_bytes)}",
        f"LOADER_TEMP_BYTES={max(a.temp_allocator_bytes, b.temp_allocator_bytes)}",
        f"LOADER_SLOT_BASE={SLOT_BASE[core.name]:#x}",
        f"LOADER_SLOT_BYTES={SLOT_BYTES:#x}",
        f"LOADER_VECTOR_OFFSET={VECTOR_OFFSET:#x}",
        # the buffers slots 1 and 3 are read into (program B, its damaged copy)
        f"LOADER_COPY_BYTES={-(-len(images[1]) // 16) * 16}",
    ]
    build = root / "build"
    harness.build(core, root / "models", build, extra=[
        f"-DRUNNER_LOADER_CASES={','.join(cases)}",
        f"-DRUNNER_LOADER_DEFINITIONS={';'.join(definitions)}",
        # the flatbuffer verifier a program from outside the image needs (off by default:
        # without it Program::load's InternalConsistency is its Minimal)
        "-DEXECUTORCH_ENABLE_PROGRAM_VERIFICATION=ON",
    ])  # fmt: skip
    contents = [images[0], images[1], images[2], damaged(images[1])]
    vectors = [vector_bytes(runs[0]), vector_bytes(runs[1])]
    places: dict[int, Path] = {}
    for index, data in enumerate(contents):
        assert len(data) <= VECTOR_OFFSET
        path = root / f"slot{index}.cmnn"
        path.write_bytes(data)
        places[SLOT_BASE[core.name] + index * SLOT_BYTES] = path
    for index, data in enumerate(vectors):
        path = root / f"slot{index}.vector"
        path.write_bytes(data)
        places[SLOT_BASE[core.name] + index * SLOT_BYTES + VECTOR_OFFSET] = path
    return LoaderBuild(build, places, (runs[0].name, runs[1].name))


@pytest.fixture(scope="module", params=list(SLOT_BASE))
def loaded(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> str:
    """The loader built for a core and run on its four slots: what it printed."""
    core = harness.CORES[request.param]
    built = build_loader(core, tmp_path_factory.mktemp(f"loader-{core.name}"))
    result = harness.run(built.build / "loader.elf", core, places=built.places)
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


def test_two_programs_from_outside_the_image_run_bit_exact(loaded: str) -> None:
    assert "loader: program A from slot 0: ok" in loaded
    # B read out of its slot in 512-byte reads, as a flash partition behind a driver is read
    assert re.search(r"loader: program B from slot 1: ok \(read into RAM, [1-9]\d* reads\)", loaded)
    assert "loader: program A ran, 0 bytes differ from the reference" in loaded
    assert "loader: program B ran, 0 bytes differ from the reference" in loaded


def test_a_missing_kernel_and_a_damaged_image_are_refused_in_one_line(loaded: str) -> None:
    refused = [line for line in loaded.splitlines() if "from slot 2" in line]
    refused += [line for line in loaded.splitlines() if "from slot 3" in line]
    assert len(refused) == 2, loaded
    assert "missing kernel" in refused[0] and "lstm.int8" in refused[0], refused[0]
    assert "program damaged" in refused[1], refused[1]


def test_the_first_model_keeps_running_after_the_refusals(loaded: str) -> None:
    assert "loader: program A again ran, 0 bytes differ from the reference" in loaded
    assert loaded.rstrip().endswith("loader: PASS")


def test_vector_layout_is_what_the_loader_reads() -> None:
    run = harness.ModelRun("x", None, (torch.ones(3, dtype=torch.int8),), [torch.zeros(2)])  # type: ignore[arg-type]
    blob = vector_bytes(run)
    assert blob[:8] == b"CMNNVEC1" and struct.unpack_from("<II", blob, 8) == (1, 1)
    assert struct.unpack_from("<I", blob, 16) == (3,) and blob[20:23] == b"\x01\x01\x01"
    assert struct.unpack_from("<I", blob, 24) == (8,)
