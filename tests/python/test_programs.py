"""cortex_m_nn.embed.programs: the programs a firmware loads at run time, prepared at build time
(the Zephyr module's CONFIG_CORTEX_M_NN_PROGRAMS step). Each refusal is one line and exit 2,
with nothing written; the header's sizes are the images' own (read back by the image reader)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from cortex_m_nn.cli import main as cli
from cortex_m_nn.embed import program_image, programs

HELLO = Path(__file__).resolve().parents[2] / "samples" / "hello_cortex_m_nn" / "model.py"


@pytest.fixture(scope="module")
def ptes(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    directory = tmp_path_factory.mktemp("programs")
    made = {}
    for name, target, extra in (
        ("hello", "cortex-m55", []),
        ("hello_int8", "cortex-m55", ["--io", "int8"]),
        ("hello_m33", "cortex-m33", []),
    ):
        made[name] = directory / f"{name}.pte"
        command = [f"{HELLO}:hello", "--target", target, "-o", str(made[name]), "-q", *extra]
        assert cli.main(command) == 0
    return made


def run(output: Path, *arguments: str) -> int:
    base = ["--output-dir", str(output), "--target", "cortex-m55+mve", "--rounding", "double"]
    return programs.main([*base, *arguments])


def test_images_and_the_header_sizing_a_model_for_any_of_them(ptes, tmp_path) -> None:
    assert run(tmp_path, str(ptes["hello"]), str(ptes["hello_int8"])) == 0
    images = {p.stem: p.read_bytes() for p in tmp_path.glob("*.cmnn")}
    assert sorted(images) == ["hello", "hello_int8"]
    headers = {name: program_image.read_header(image) for name, image in images.items()}
    text = (tmp_path / programs.HEADER_NAME).read_text()
    defined = {k: int(v) for k, v in re.findall(r"#define (\w+) (\d+)u", text)}
    assert defined["CORTEX_M_NN_PROGRAM_COUNT"] == 2
    assert defined["CORTEX_M_NN_PROGRAM_HELLO_INT8_IMAGE_BYTES"] == len(images["hello_int8"])
    for field, of in (
        ("IMAGE_BYTES", lambda name: len(images[name])),
        ("ARENA_BYTES", lambda name: headers[name].arena_bytes),
        ("METHOD_ALLOCATOR_BYTES", lambda name: headers[name].method_allocator_bytes),
        ("TEMP_ALLOCATOR_BYTES", lambda name: headers[name].temp_allocator_bytes),
    ):
        assert defined[f"CORTEX_M_NN_PROGRAMS_{field}"] == max(of(name) for name in images)
    cmake = (tmp_path / programs.CMAKE_NAME).read_text()
    cases = re.search(r'set\(CORTEX_M_NN_PROGRAMS_CASES "([^"]*)"\)', cmake).group(1).split(";")
    assert set(cases) == {case for header in headers.values() for case in header.cases}


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["{hello_m33}"], "recompile it with cortex-m-compile --target cortex-m55+mve"),
        (["{hello}", "{hello}"], "two programs are named hello: rename one file"),
        (["{hello}", "--partition-bytes", "1024"], "larger than the partition 'model_partition'"),
        (["{missing}"], "does not exist: compile it with cortex-m-compile"),
    ],
)
def test_a_program_the_firmware_would_refuse_stops_the_build_in_one_line(
    ptes, tmp_path, capsys, arguments: list[str], message: str
) -> None:
    paths = {**{k: str(v) for k, v in ptes.items()}, "missing": str(tmp_path / "none.pte")}
    assert run(tmp_path / "out", *[a.format(**paths) for a in arguments]) == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and message in error, error
    assert not (tmp_path / "out").exists()


def test_all_kernels_registers_every_case_whatever_the_programs(ptes, tmp_path) -> None:
    from cortex_m_nn.core.operators import load_yaml

    assert run(tmp_path, "--all-kernels") == 0
    _, operators = load_yaml()
    cmake = (tmp_path / programs.CMAKE_NAME).read_text()
    cases = re.search(r'set\(CORTEX_M_NN_PROGRAMS_CASES "([^"]*)"\)', cmake).group(1).split(";")
    assert set(cases) == {f"{op.name}.{case}" for op in operators for case in op.case_names}
    assert "#define CORTEX_M_NN_PROGRAM_COUNT 0u" in (tmp_path / programs.HEADER_NAME).read_text()
