"""The samples' firmware code on the host: the same main.cpp, src/model.cpp and generated files
the Zephyr build compiles, run with ExecuTorch's runtime and the host build of the kernels.

Each app's output must satisfy its sample.yaml console regexes the way Twister's console
harness does (multi_line, ordered), and end with PASS: the outputs equal the compiler's
bit-exact references. Needs CMSIS_NN_PATH (a CMSIS-NN checkout), cmake and a C++ compiler.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from cortex_m_nn.check import host_kernels
from cortex_m_nn.cli import main as cli
from cortex_m_nn.embed import program_image, programs
from cortex_m_nn.embed.pte_source import model_facts

ROOT = Path(__file__).resolve().parents[2]
HOST = Path(__file__).resolve().parent / "host"
#: the stand-in of Zephyr's scripts/build/file2hex.py (a file's bytes as a C initialiser)
FILE2HEX = Path(__file__).resolve().parent / "zephyr_package/scripts/build/file2hex.py"

#: app name -> (main.cpp, model as CONFIG_CORTEX_M_NN_MODEL_SOURCE gives it, sample.yaml)
APPS = {
    "hello": (
        ROOT / "samples/hello_cortex_m_nn/src/main.cpp",
        f"{ROOT / 'samples/hello_cortex_m_nn/model.py'}:hello",
        ROOT / "samples/hello_cortex_m_nn/sample.yaml",
    ),
    "keyword_spotting": (
        ROOT / "samples/keyword_spotting/src/main.cpp",
        "ds_cnn",
        ROOT / "samples/keyword_spotting/sample.yaml",
    ),
    # The keyword spotter waking a program loaded from the flash-map stand-in's partition.
    "two_models": (
        ROOT / "samples/two_models/src/main.cpp",
        "ds_cnn",
        ROOT / "samples/two_models/sample.yaml",
    ),
    # Every cortex_m_nn operator (the on-target ztest model), driven by hello's main.
    "kernels": (
        ROOT / "samples/hello_cortex_m_nn/src/main.cpp",
        f"{ROOT / 'tests/zephyr/kernels/model.py'}:kernels",
        ROOT / "samples/hello_cortex_m_nn/sample.yaml",
    ),
}


#: hello with a prepared-call entry that no longer matches its program (cortex_m_nn.embed.prepared)
DAMAGED = "hello_damaged_prepared"


def _io(main: Path) -> str:
    """The I/O the app's prj.conf compiles its model with (CONFIG_CORTEX_M_NN_MODEL_IO_INT8)."""
    conf = (main.parents[1] / "prj.conf").read_text()
    return "int8" if "CONFIG_CORTEX_M_NN_MODEL_IO_INT8=y" in conf else "float"


def _compile_model(source: str, directory: Path, io: str = "float") -> None:
    """What the module's CMake does: cortex-m-compile for the kernels' ISA, then embed."""
    directory.mkdir(parents=True, exist_ok=True)
    pte = directory / "model.pte"
    status = cli.main(
        [
            source,
            # The host kernels are CMSIS-NN's portable C path.
            "--target",
            "cortex-m55+scalar",
            "-o",
            str(pte),
            "--test-vector",
            str(directory / "cortex_m_nn_test_vector.h"),
            "--io",
            io,
            "-q",
        ]
    )
    assert status == 0
    # The method-allocator estimate is for 32-bit cores; the host's 64-bit runtime
    # structures (pointers, tensor headers) take up to about twice as much.
    embedded = ["embed", str(pte), "--output-dir", str(directory), "--method-margin", "200"]
    assert cli.main([*embedded, "-q"]) == 0


def _compile_programs(main: Path, directory: Path) -> None:
    """What the module's CMake does for CONFIG_CORTEX_M_NN_PROGRAMS (models, with their test
    vectors), and the sample's generate_inc_file_for_target of each image (file2hex's form)."""
    conf = (main.parents[1] / "prj.conf").read_text()
    found = re.search(r'^CONFIG_CORTEX_M_NN_PROGRAMS="([^"]*)"', conf, re.MULTILINE)
    if found is None:
        return
    ptes = []
    for entry in found.group(1).split():
        path, _, factory = entry.rpartition(":")
        pte = directory / "compiled" / f"{factory}.pte"
        pte.parent.mkdir(parents=True, exist_ok=True)
        source = f"{(main.parents[1] / path).resolve()}:{factory}"
        vector = directory / f"{factory}_test_vector.h"
        command = [source, "--target", "cortex-m55+scalar", "-o", str(pte), "-q"]
        assert cli.main([*command, "--test-vector", str(vector)]) == 0
        ptes.append(pte)
    prepare = ["--output-dir", str(directory), "--target", "cortex-m55+scalar"]
    assert (
        programs.main(
            [*prepare, "--rounding", "double", "--method-margin", "200"]
            + [str(pte) for pte in ptes]
        )
        == 0
    )
    for pte in ptes:  # Zephyr's file2hex.py, as generate_inc_file_for_target runs it
        image, inc = directory / f"{pte.stem}.cmnn", directory / f"{pte.stem}_image.inc"
        subprocess.run([sys.executable, str(FILE2HEX), str(image), str(inc)], check=True)


@pytest.fixture(scope="module")
def apps(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Path]:
    cmsis_nn = os.environ.get(host_kernels.CMSIS_NN_VARIABLE)
    if not cmsis_nn:
        pytest.skip(f"{host_kernels.CMSIS_NN_VARIABLE} is not set (a CMSIS-NN checkout)")
    cmake = shutil.which("cmake")
    if cmake is None or shutil.which("c++") is None:
        pytest.skip("cmake and a C++ compiler are needed")
    work = tmp_path_factory.mktemp("host-apps")
    specs = []
    for name, (main, source, _) in APPS.items():
        _compile_model(source, work / name, _io(main))
        _compile_programs(main, work / name)
        sources = ",".join(str(path) for path in sorted(main.parent.glob("*.cpp")))
        specs.append(f"{name}={sources}={work / name}")
    # hello again, with one field of its first prepared call changed after embedding
    main, source, _ = APPS["hello"]
    _compile_model(source, work / DAMAGED, _io(main))
    model_c = work / DAMAGED / "cortex_m_nn_model.c"
    text = model_c.read_text()
    assert text.count(".input = {.n = 1,") >= 1
    model_c.write_text(text.replace(".input = {.n = 1,", ".input = {.n = 2,", 1))
    specs.append(f"{DAMAGED}={main}={work / DAMAGED}")
    import executorch

    # Kept between runs (pytest's cache): CMSIS-NN and the kernels build once.
    build = Path(request.config.cache.mkdir("host-apps"))
    configure = [
        cmake,
        "-S",
        str(HOST),
        "-B",
        str(build),
        f"-DCMSIS_NN_PATH={cmsis_nn}",
        f"-DPython3_EXECUTABLE={sys.executable}",
        f"-DEXECUTORCH_LIB_DIR={Path(list(executorch.__path__)[0]) / 'lib'}",
        f"-DCORTEX_M_NN_APPS={';'.join(specs)}",
        f"-DCORTEX_M_NN_ZTEST_MODEL={work / 'kernels'}",
        "-DCMAKE_BUILD_TYPE=Release",
    ]
    for command in (configure, [cmake, "--build", str(build), "-j", "2"]):
        result = subprocess.run(command, capture_output=True, text=True)
        assert result.returncode == 0, (result.stdout + result.stderr)[-4000:]
    found = {name: build / f"app_{name}" for name in [*APPS, DAMAGED]}
    for name in ("image_loader", "ztest_kernels", "ztest_fails"):
        found[name] = build / name
    images = work / "images"  # the hello and keyword-spotting programs, as images
    images.mkdir()
    for name in ("hello", "keyword_spotting"):
        pte = work / name / "model.pte"
        image = program_image.image_bytes(pte.read_bytes(), model_facts(pte.read_bytes(), 200))
        (images / f"{name}.cmnn").write_bytes(image)
    found["images"] = images
    return found


def twister_console(lines: list[str], harness_config: dict) -> bool:
    """Twister's console harness, multi_line and ordered: each regex matches a later line."""
    patterns = [re.compile(p) for p in harness_config["regex"]]
    position = 0
    for line in lines:
        if position < len(patterns) and patterns[position].search(line):
            position += 1
    return position == len(patterns)


@pytest.mark.parametrize("name", sorted(APPS))
def test_app_passes_its_sample_checks(apps: dict[str, Path], name: str) -> None:
    result = subprocess.run([str(apps[name])], capture_output=True, text=True, timeout=120)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    lines = output.splitlines()
    assert lines[-1] == "PASS", output
    sample = yaml.safe_load(APPS[name][2].read_text())
    assert twister_console(lines, sample["common"]["harness_config"]), output


def test_a_prepared_call_that_differs_from_the_program_fails_the_load(
    apps: dict[str, Path],
) -> None:
    result = subprocess.run([str(apps[DAMAGED])], capture_output=True, text=True, timeout=120)
    output = result.stdout + result.stderr
    refused = r"prepared call \d+ \(cortex_m_nn_model.c\) differs from the program's call"
    assert re.search(refused, output), output
    assert "load: " in output and result.stdout.splitlines()[-1] == "FAIL", output


def test_the_ztest_suite_passes_on_the_host(apps: dict[str, Path]) -> None:
    """tests/zephyr/kernels/src/main.cpp (the suite Twister runs on the target) through the
    ztest stand-in: every test of it passes."""
    result = subprocess.run([str(apps["ztest_kernels"])], capture_output=True, text=True)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    passed = re.findall(r"^ PASS - (\w+)$", result.stdout, re.M)
    source = (ROOT / "tests/zephyr/kernels/src/main.cpp").read_text()
    assert passed == re.findall(r"^ZTEST\(\w+, (\w+)\)", source, re.M)
    assert result.stdout.splitlines()[-1] == "PROJECT EXECUTION SUCCESSFUL", output


def test_the_ztest_stand_in_fails_a_failing_assertion(apps: dict[str, Path]) -> None:
    result = subprocess.run([str(apps["ztest_fails"])], capture_output=True, text=True)
    assert result.returncode == 1, result.stdout
    assert " PASS - test_passes" in result.stdout
    assert " FAIL - test_fails_with_a_message" in result.stdout
    assert "1 + 1 == 3: sum 2" in result.stdout
    assert " FAIL - test_fails_without_one" in result.stdout
    assert result.stdout.splitlines()[-1] == "PROJECT EXECUTION FAILED"


def test_console_check_can_fail() -> None:
    config = {"regex": ["first", "PASS"], "type": "multi_line", "ordered": True}
    assert twister_console(["first", "PASS"], config)
    assert not twister_console(["PASS", "first"], config)
    assert not twister_console(["first", "FAIL"], config)


def _load_images(
    apps: dict[str, Path], images: list[bytes], directory: Path, partition: bool = False
) -> list[list[str]]:
    """The sanitized image_loader's line per image, split at its fields; with ``partition``,
    each image is written into the flash-map stand-in's partition and loaded from there."""
    paths = []
    for index, image in enumerate(images):
        path = directory / f"{index}.cmnn"
        path.write_bytes(image)
        paths.append(str(path))
    result = subprocess.run(  # (a damaged program's names reach the log as they are)
        [str(apps["image_loader"]), *(["--partition"] if partition else []), *paths],
        capture_output=True,
        text=True,
        errors="replace",
        timeout=600,
    )
    assert result.returncode == 0, (result.stdout + result.stderr)[-3000:]  # no sanitizer report
    lines = [line.split("|") for line in result.stdout.splitlines()]
    assert len(lines) == len(images), result.stdout
    return lines


def _resealed(image: bytes, position: int, value: int) -> bytes:
    """``image`` with byte ``position`` of its program set to ``value`` and both CRC-32s made
    right again: damage no checksum catches, which the program's own checks must."""
    import struct
    import zlib

    header = program_image.read_header(image)
    changed = bytearray(image)
    changed[header.program_offset + position] = value
    program = changed[header.program_offset : header.program_offset + header.program_bytes]
    changed[24:28] = struct.pack("<I", zlib.crc32(bytes(program)))
    changed[12:16] = b"\0\0\0\0"
    changed[12:16] = struct.pack("<I", zlib.crc32(bytes(changed[: header.program_offset])))
    return bytes(changed)


def _damaged_images(apps: dict[str, Path]) -> tuple[bytes, bytes, bytes, bytes]:
    """hello's and keyword spotting's images; hello with a program bit flipped, and hello
    marked as compiled for MVE with its header's CRC-32 made right."""
    hello = (apps["images"] / "hello.cmnn").read_bytes()
    kws = (apps["images"] / "keyword_spotting.cmnn").read_bytes()
    header = program_image.read_header(hello)
    flipped = bytearray(hello)
    flipped[header.program_offset + 40] ^= 4
    other_isa = bytearray(hello)
    other_isa[32] = 2  # MVE, where the host's kernels are the portable C path
    other_isa[12:16] = b"\0\0\0\0"
    import struct
    import zlib

    other_isa[12:16] = struct.pack("<I", zlib.crc32(bytes(other_isa[: header.program_offset])))
    return hello, kws, bytes(flipped), bytes(other_isa)


def test_run_time_models_load_run_and_refuse_images(apps: dict[str, Path], tmp_path: Path) -> None:
    """One run-time model loads two programs in turn and runs each; truncated, bit-flipped and
    incompatible images are refused, each leaving the program loaded before (sanitized)."""
    hello, kws, flipped, other_isa = _damaged_images(apps)
    lines = _load_images(apps, [hello, hello[:-9], flipped, other_isa, kws, hello], tmp_path)
    assert [line[1] for line in lines] == [
        "ok", "bad program image", "bad program image", "compiled for other kernels", "ok", "ok",
    ]  # fmt: skip
    assert all(line[3] == "loaded=1" for line in lines), lines  # a refusal keeps the model
    assert [line[4] for line in lines if len(line) > 4] == ["run=ok"] * 6
    assert "truncated" in lines[1][2] and "program damaged" in lines[2][2]


def test_damage_the_checksums_miss_never_crashes_the_load(
    apps: dict[str, Path], tmp_path: Path
) -> None:
    """Program bytes changed with both CRC-32s made right again (what a checksum cannot
    catch): ExecuTorch's verification and each kernel call's proof refuse what they must, and
    nothing crashes or reads out of bounds in the firmware API (sanitized)."""
    import random

    hello = (apps["images"] / "hello.cmnn").read_bytes()
    size = program_image.read_header(hello).program_bytes
    rng = random.Random(11)
    images = [_resealed(hello, rng.randrange(size), rng.randrange(256)) for _ in range(500)]
    lines = _load_images(apps, images, tmp_path)
    statuses = {line[1] for line in lines}
    assert statuses <= {"ok", "load failed", "compiled for other kernels", "bad input"}, statuses


def test_images_written_into_a_flash_partition_load_or_are_refused(
    apps: dict[str, Path], tmp_path: Path
) -> None:
    """The Zephyr path (src/flash_partition.cpp on the flash-map stand-in, sanitized): images
    written into a partition in pieces load into the buffer not in service and run; an
    interrupted write, a bit flip, other kernels and an erased partition are refused in one
    line, the program before kept; the buffer in service is never read into."""
    hello, kws, flipped, other_isa = _damaged_images(apps)
    images = [hello, hello[: len(hello) // 2], flipped, other_isa, b"", kws, hello]
    lines = _load_images(apps, images, tmp_path, partition=True)
    assert [line[1] for line in lines] == [
        "ok", "bad program image", "bad program image", "compiled for other kernels",
        "bad program image", "ok", "ok",
    ]  # fmt: skip
    # half an image: the rest of the partition reads erased, which its program's CRC-32 catches
    assert "program damaged" in lines[1][2] and "program damaged" in lines[2][2]
    assert "not a program image" in lines[4][2], lines[4]
    assert all(line[3] == "loaded=1" and line[4] == "run=ok" for line in lines), lines
    assert [line[-2] for line in lines] == ["write=0"] * len(images)
    # from the second load on, a model running a program refuses to read into its buffer
    assert [line[-1] for line in lines] == ["same_buffer=-"] + ["same_buffer=load failed"] * 6


def test_damage_the_checksums_miss_never_crashes_a_partition_load(
    apps: dict[str, Path], tmp_path: Path
) -> None:
    """Resealed damage (both CRC-32s right) read from a flash partition: refused or run,
    never a crash or an out-of-bounds read (sanitized)."""
    import random

    hello = (apps["images"] / "hello.cmnn").read_bytes()
    size = program_image.read_header(hello).program_bytes
    rng = random.Random(12)
    images = [_resealed(hello, rng.randrange(size), rng.randrange(256)) for _ in range(200)]
    lines = _load_images(apps, images, tmp_path, partition=True)
    statuses = {line[1] for line in lines}
    assert statuses <= {"ok", "load failed", "compiled for other kernels", "bad input"}, statuses
    assert all(line[-2] == "write=0" for line in lines), lines[:3]
