"""The TensorFlow Lite Micro + CMSIS-NN peer on the emulated Cortex-M cores.

Usage (from the repository root)::

    PYTHONPATH=python:. python benchmarks/peer_tflm.py [--cores m55,m33,m4]
        [--models ds_cnn,resnet8,mobilenet_v1_025,autoencoder] [--build-dir DIR] [--json FILE]
        [--int8-registrations]

Runs the MLPerf Tiny reference int8 models (``MODELS``: KWS, IC, VWW, AD for our ds_cnn,
resnet8, mobilenet_v1_025, autoencoder) on TFLM with its CMSIS-NN kernels
(``OPTIMIZED_KERNEL_DIR=cmsis_nn``), built by ``benchmarks/peer_tflm/CMakeLists.txt`` on the
bare-metal runner's BSP, toolchain file and flags (``-O3`` kernels and CMSIS-NN, TFLM's runtime
``-Os`` as ExecuTorch's is, newlib-nano) and the same CMSIS-NN checkout. What it needs (each
missing one makes :func:`status` say why in one line):

* ``TFLM_ROOT``: a tflite-micro checkout; ``MLPERF_TINY_ROOT``: a mlcommons/tiny checkout
  (``benchmark/training/*/trained_models/*.tflite``); ``CMSIS_NN_PATH``: a CMSIS-NN checkout;
* flatbuffers' ``include/`` of the version TFLM's ``schema_generated.h`` asserts (25.9.23 for
  tflite-micro of Aug 2026, not ExecuTorch's 24.3.25): ``TFLM_FLATBUFFERS_INCLUDE_DIR``, else
  ``FLATBUFFERS_INCLUDE_DIR``; ``GEMMLOWP_ROOT``: a google/gemmlowp checkout (``fixedpoint/``);
  ``RUY_ROOT``: a google/ruy checkout (only ``ruy/profiler/instrumentation.h``);
* ``arm-none-eabi-gcc``, ``qemu-system-arm``, ``cmake`` on PATH; the ``flatbuffers`` Python
  package (the embed step reads each model's operators with TFLM's schema).

Per model and core, :func:`measure` gives:

* instructions: exactly the instructions of one ``MicroInterpreter::Invoke()`` between
  ``bench_start()`` and ``bench_stop()`` (insncount plugin), the first Invoke after
  ``AllocateTensors()`` (no warm-up, as bench_target measures one ``execute``), on a fixed
  int8 input pattern (TFLM's inputs and outputs are int8: there is no boundary quantize), and
  the share of it inside CMSIS-NN's functions (``cmsis_nn_share``); the outputs (hex);
* flash and RAM of the ELF (``cortex_m_nn.embed.firmware.inspect``; RAM = ``.data`` + ``.bss``,
  which
  holds the static arena, stack and heap not counted), by component (``COMPONENTS``): model,
  arena, TFLM kernels, CMSIS-NN, TFLM runtime, application, unattributed; the model's bytes;
* ``arena_used``: ``interpreter.arena_used_bytes()``; ``arena_bytes``: the static arena of the
  measured ELF. Each ELF is built twice: first with a large arena, finding the smallest one
  with which ``AllocateTensors()`` succeeds (it can exceed ``arena_used_bytes()``: AD on M55
  needs 9,712 B, uses 9,268 B), then with the static arena of that size, so
  the RAM counts the arena TFLM needs, as ours counts the planned one; the second is measured.

The resolver is a ``MicroMutableOpResolver`` registering exactly the model's builtin operators
with TFLM's default registrations (``AddConv2D()`` …: the CMSIS-NN kernels, which dispatch on
the tensor type at run time); ``--int8-registrations`` registers the int8-only ones
(``Register_CONV_2D_INT8()`` …) where TFLM has them.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import re
import shutil
import sys
from collections.abc import Callable
from operator import itemgetter
from pathlib import Path
from typing import TYPE_CHECKING, Any

import insncount
from insncount import first_region, library_symbols, report

REPO = Path(__file__).resolve().parents[1]
SOURCE = REPO / "benchmarks" / "peer_tflm"

if TYPE_CHECKING:
    from tests.target import harness

#: our model → (MLPerf Tiny benchmark, its reference int8 model in MLPERF_TINY_ROOT)
TRAINED = "benchmark/training/{}/trained_models/{}"
MODELS = {
    "ds_cnn": ("KWS", TRAINED.format("keyword_spotting", "kws_ref_model.tflite")),
    "resnet8": ("IC", TRAINED.format("image_classification", "pretrainedResnet_quant.tflite")),
    "mobilenet_v1_025": ("VWW", TRAINED.format("visual_wake_words", "vww_96_int8.tflite")),
    "autoencoder": ("AD", TRAINED.format("anomaly_detection", "ad01_int8.tflite")),
}

#: environment variable → (a file it must contain, what it is)
ROOTS = {
    "TFLM_ROOT": ("tensorflow/lite/micro/micro_interpreter.h", "a tflite-micro checkout"),
    "MLPERF_TINY_ROOT": ("benchmark/training", "a mlcommons/tiny checkout"),
    "CMSIS_NN_PATH": ("Include/arm_nnfunctions.h", "a CMSIS-NN checkout"),
    "GEMMLOWP_ROOT": ("fixedpoint/fixedpoint.h", "a google/gemmlowp checkout"),
    "RUY_ROOT": ("ruy/profiler/instrumentation.h", "a google/ruy checkout"),
}
#: the large arena of the first build, which finds each model's smallest arena
PROBE_ARENA = 256 * 1024
COMPONENTS = (
    "model",
    "arena",
    "TFLM kernels",
    "CMSIS-NN",
    "TFLM runtime",
    "application",
    "unattributed",
)


def status() -> str:
    """'' if the peer can be built and run, else one line saying why not."""
    for variable, (inside, what) in ROOTS.items():
        value = os.environ.get(variable)
        if not value:
            return f"{variable} is not set ({what})"
        if not (Path(value) / inside).exists():
            return f"{variable}={value} is not {what} (no {inside})"
    reason = flatbuffers_include()[1]
    if reason:
        return reason
    for tool in ("arm-none-eabi-gcc", "arm-none-eabi-nm", "qemu-system-arm", "cmake"):
        if not shutil.which(tool):
            return f"{tool} is not on PATH"
    if importlib.util.find_spec("flatbuffers") is None:
        return "the flatbuffers Python package is not installed (the embed step needs it)"
    return ""


def flatbuffers_include() -> tuple[Path | None, str]:
    """(flatbuffers' include/ for TFLM, '') or (None, why there is none)."""
    names = ("TFLM_FLATBUFFERS_INCLUDE_DIR", "FLATBUFFERS_INCLUDE_DIR")
    variable = next((v for v in names if os.environ.get(v)), None)
    if variable is None:
        return None, "FLATBUFFERS_INCLUDE_DIR (or TFLM_FLATBUFFERS_INCLUDE_DIR) is not set"
    include = Path(os.environ[variable])
    base = include / "flatbuffers" / "base.h"
    if not base.is_file():
        return None, f"{variable}={include} is not flatbuffers' include/ (no flatbuffers/base.h)"
    schema = Path(os.environ["TFLM_ROOT"]) / "tensorflow/lite/schema/schema_generated.h"
    versions = [
        ".".join(
            m.group(1) if (m := re.search(rf"FLATBUFFERS_VERSION_{part}\D+(\d+)", text)) else "?"
            for part in ("MAJOR", "MINOR", "REVISION")
        )
        for text in (schema.read_text(), base.read_text())
    ]
    if versions[0] != versions[1]:
        return None, (
            f"TFLM's schema needs flatbuffers {versions[0]}, {variable} has {versions[1]} "
            "(set TFLM_FLATBUFFERS_INCLUDE_DIR)"
        )
    return include, ""


# --- embed: the model as a C array and its operators (run by CMake at configure time) ----------


def model_operators(tflite: bytes, schema: Path) -> list[str]:
    """The builtin operators (``CONV_2D`` …) of the model's subgraphs, in first-use order."""
    spec = importlib.util.spec_from_file_location("tflm_schema", schema)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    names = {v: k for k, v in vars(module.BuiltinOperator).items() if not k.startswith("_")}
    model = module.Model.GetRootAsModel(tflite, 0)
    codes = []
    for i in range(model.OperatorCodesLength()):
        code = model.OperatorCodes(i)
        # builtin codes past 127 are only in BuiltinCode; older files only fill the deprecated one
        codes.append(names[max(code.BuiltinCode(), code.DeprecatedBuiltinCode())])
    used: list[str] = []
    for s in range(model.SubgraphsLength()):
        graph = model.Subgraphs(s)
        for i in range(graph.OperatorsLength()):
            name = codes[graph.Operators(i).OpcodeIndex()]
            if name == "CUSTOM":
                raise ValueError("the model has custom operators")
            if name not in used:
                used.append(name)
    return used


def registration(operator: str, tflm_root: Path, int8: bool) -> str:
    """The resolver call registering ``operator`` (``CONV_2D`` → ``AddConv2D()``)."""
    method = "Add" + "".join(
        part.capitalize() if part[0].isalpha() else part for part in operator.split("_")
    )
    resolver = tflm_root / "tensorflow/lite/micro/micro_mutable_op_resolver.h"
    if f" {method}(" not in resolver.read_text():
        raise ValueError(f"TFLM's MicroMutableOpResolver has no {method}() for {operator}")
    kernels = tflm_root / "tensorflow/lite/micro/kernels/cmsis_nn"
    int8_kernel = f"Register_{operator}_INT8"
    if int8 and any(f"{int8_kernel}()" in f.read_text() for f in kernels.glob("*.cc")):
        return f"{method}(tflite::{int8_kernel}())"
    return f"{method}()"


def embed(tflite_path: Path, schema: Path, tflm_root: Path, output_dir: Path, int8: bool) -> None:
    """Write ``tflm_model.cc`` (the model, 16-byte aligned in section ``.cortex_m_nn_model``)
    and ``tflm_model.h`` (its resolver size and ``tflm_add_operators()``) to ``output_dir``."""
    data = tflite_path.read_bytes()
    operators = model_operators(data, schema)
    calls = [registration(op, tflm_root, int8) for op in operators]
    output_dir.mkdir(parents=True, exist_ok=True)
    rows = ",\n".join(
        "  " + ",".join(f"0x{b:02x}" for b in data[i : i + 16]) for i in range(0, len(data), 16)
    )
    source = (
        f"// {tflite_path.name}, {len(data)} B (written by benchmarks/peer_tflm.py embed)\n"
        f'#include "tflm_model.h"\n'
        f"alignas(16) const unsigned char tflm_model[{len(data)}]\n"
        f'    __attribute__((section(".cortex_m_nn_model"), used)) = {{\n{rows}\n}};\n'
    )
    adds = "".join(f"  if (r.{c} != kTfLiteOk) return kTfLiteError;\n" for c in calls)
    header = (
        f"// {tflite_path.name}: {', '.join(operators)}\n"
        "// (written by benchmarks/peer_tflm.py embed)\n"
        "#pragma once\n"
        '#include "tensorflow/lite/micro/micro_mutable_op_resolver.h"\n'
        f"extern const unsigned char tflm_model[{len(data)}];\n"
        f"constexpr unsigned kTflmModelOperators = {len(calls)};\n"
        "inline TfLiteStatus tflm_add_operators(\n"
        "    tflite::MicroMutableOpResolver<kTflmModelOperators>& r) {\n"
        f"{adds}  return kTfLiteOk;\n}}\n"
    )
    for name, text in (("tflm_model.cc", source), ("tflm_model.h", header)):
        path = output_dir / name
        if not path.exists() or path.read_text() != text:  # unchanged: no rebuild
            path.write_text(text)


# --- build and run -----------------------------------------------------------------------------


def build(
    core: harness.Core,
    models: list[str],
    build_dir: Path,
    arenas: dict[str, int],
    int8_registrations: bool = False,
    core_optimization: str = "-Os",
) -> None:
    """Configure and build ``tflm_NAME.elf`` for each model; ``arenas``: static arena bytes per
    model (the others get PROBE_ARENA); ``core_optimization``: TFLM's runtime's flags."""
    from tests.target import harness

    env = os.environ
    root = Path(env["MLPERF_TINY_ROOT"])
    definitions = [
        f"-DTFLM_MODELS={';'.join(f'{m}={root / MODELS[m][1]}' for m in models)}",
        f"-DTFLM_ARENA_BYTES={PROBE_ARENA}",
        f"-DTFLM_INT8_REGISTRATIONS={'ON' if int8_registrations else 'OFF'}",
        f"-DTFLM_CORE_OPTIMIZATION={core_optimization}",
        *(f"-D{v}={env[v]}" for v in ROOTS if v != "MLPERF_TINY_ROOT"),
        f"-DFLATBUFFERS_INCLUDE_DIR={flatbuffers_include()[0]}",
    ]
    for model in models:
        # unset goes back to the probe size: a stale cache entry would keep an old arena
        value = arenas.get(model)
        definitions.append(
            f"-DTFLM_ARENA_BYTES_{model}={value}" if value else f"-UTFLM_ARENA_BYTES_{model}"
        )
    harness.cmake_build(SOURCE, build_dir, core, definitions)


def archive_symbols(build_dir: Path, name: str) -> set[str]:
    """Symbols defined by the static library ``name`` (``libNAME.a``) of this build."""
    return library_symbols(next(build_dir.rglob(f"lib{name}.a")))


def tflm_classifier(build_dir: Path) -> Callable[[str, str], str]:
    """``firmware.inspect``'s ``classify`` for the peer's COMPONENTS: the model section,
    main.cc's static arena, libtflm_kernels, CMSIS-NN (``arm_*``), libtflm_core (the
    interpreter, allocator, flatbuffer parsing: TFLM's runtime), the rest (application: BSP, C
    library); what no symbol covers stays unattributed."""
    from cortex_m_nn.embed import firmware

    kernels = archive_symbols(build_dir, "tflm_kernels")
    runtime = archive_symbols(build_dir, "tflm_core")

    def classify(symbol: str, section: str) -> str:
        if section == firmware.MODEL_SECTION:
            return "model"
        if symbol == "_ZN12_GLOBAL__N_15arenaE":  # main.cc's (anonymous namespace)::arena
            return "arena"
        if symbol.startswith("arm_"):
            return "CMSIS-NN"
        if symbol in kernels:
            return "TFLM kernels"
        if symbol in runtime or symbol.startswith("_ZN11flatbuffers"):
            return "TFLM runtime"
        return "application"

    return classify


def failure(result: Any) -> str:
    """One line saying why a run failed."""
    lines = [line for line in (result.stdout + result.stderr).splitlines() if line.strip()]
    return f"exit status {result.returncode}: {lines[-1] if lines else 'no output'}"


def arena_used(stdout: str) -> int | None:
    m = re.search(r"peer: arena (\d+) of (\d+) B used", stdout)
    return int(m.group(1)) if m else None


def probe(core: harness.Core, models: list[str], build_dir: Path, **options: Any) -> dict:
    """Each model's smallest arena (or its error) from a build with PROBE_ARENA."""
    from tests.target import harness

    build(core, models, build_dir, {}, **options)
    found: dict[str, Any] = {}
    for model in models:
        result = harness.run(build_dir / f"tflm_{model}.elf", core)
        m = re.search(r"peer: smallest arena (\d+) B", result.stdout)
        ok = result.returncode == 0 and m
        found[model] = int(m.group(1)) if ok and m else {"error": failure(result)}
    return found


def run_one(model: str, core: harness.Core, build_dir: Path, plugin: Path) -> dict[str, Any]:
    """Run one ELF under the plugin; its row (or its error)."""
    from tests.target import harness

    from cortex_m_nn.embed import firmware

    elf = build_dir / f"tflm_{model}.elf"
    result = harness.run(elf, core, f"{plugin},symbols=on")
    instructions, symbols = first_region(result.stderr + result.stdout)
    if result.returncode != 0 or instructions is None:
        return {"error": failure(result)}
    cmsis = archive_symbols(build_dir, "cmsis-nn")
    report = firmware.inspect(elf, classify=tflm_classifier(build_dir), components=COMPONENTS)
    in_cmsis = sum(n for name, n in symbols.items() if name in cmsis)
    section = report["model"] or {}
    return {
        "mlperf": MODELS[model][0],
        "instructions": instructions,
        "cmsis_nn_share": in_cmsis / instructions,
        "flash_bytes": report["flash_bytes"],
        "ram_bytes": report["ram_bytes"],
        "arena_used": arena_used(result.stdout),
        "flash": report["flash"],
        "ram": report["ram"],
        "model_bytes": section.get("size", 0),
        "outputs": [b.hex() for b in result.outputs()],
    }


def measure(
    models: list[str],
    cores: list[harness.Core],
    build_dir: Path,
    plugin: Path,
    int8_registrations: bool = False,
    core_optimization: str = "-Os",
) -> dict[tuple[str, str], dict]:
    """(model, core name) → the peer's measurements, or ``{"error": one line}``; builds in
    ``build_dir/tflm-CORE``. ``plugin``: the insncount plugin (harness.build_plugin)."""
    rows: dict[tuple[str, str], dict] = {}
    for core in cores:
        directory = build_dir / f"tflm-{core.name}"
        options = {
            "int8_registrations": int8_registrations,
            "core_optimization": core_optimization,
        }
        try:
            smallest = probe(core, models, directory, **options)
            arenas = {m: n for m, n in smallest.items() if isinstance(n, int)}
            build(core, models, directory, arenas, **options)
        except RuntimeError as error:
            first = str(error).splitlines()[0]
            rows.update({(m, core.name): {"error": first} for m in models})
            continue
        for model in models:
            if model not in arenas:
                rows[(model, core.name)] = smallest[model]
                continue
            row = run_one(model, core, directory, plugin)
            rows[(model, core.name)] = (
                row if "error" in row else {**row, "arena_bytes": arenas[model]}
            )
    return rows


# --- command line ------------------------------------------------------------------------------


def table(rows: dict[tuple[str, str], dict]) -> str:
    """The measurements as a table people read."""
    named = {key: {**r, "mlperf": MODELS[key[0]][0]} for key, r in rows.items()}
    return insncount.table(
        named,
        [
            ("MLPerf", "<7", itemgetter("mlperf")),
            ("instructions", ">13,", itemgetter("instructions")),
            ("CMSIS-NN", ">9.1%", itemgetter("cmsis_nn_share")),
            ("flash B", ">10,", itemgetter("flash_bytes")),
            ("RAM B", ">9,", itemgetter("ram_bytes")),
            ("arena used", ">11,", itemgetter("arena_used")),
            ("arena B", ">9,", itemgetter("arena_bytes")),
            ("model B", ">9,", itemgetter("model_bytes")),
        ],
    )


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["embed"]:
        return embed_main(argv[1:])
    sys.path[:0] = [str(REPO / "python"), str(REPO)]
    from tests.target import harness

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cores", default="m55,m33,m4")
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--build-dir", type=Path, default=REPO / "build" / "bench-target")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--int8-registrations", action="store_true")
    args = parser.parse_args(argv)
    reason = status()
    if reason:
        print(f"peer_tflm: skipped: {reason}")
        return 0
    models = args.models.split(",")
    unknown = [m for m in models if m not in MODELS]
    if unknown:
        parser.error(f"no MLPerf Tiny model for {', '.join(unknown)} (have {', '.join(MODELS)})")
    cores = [harness.CORES[c] for c in args.cores.split(",")]
    plugin = harness.build_plugin(args.build_dir / "plugin")
    rows = measure(models, cores, args.build_dir, plugin, args.int8_registrations)
    return report(rows, table(rows), args.json)


def embed_main(argv: list[str]) -> int:
    """``peer_tflm.py embed FILE.tflite --schema ... --tflm-root ... --output-dir ...``"""
    parser = argparse.ArgumentParser(prog="peer_tflm.py embed", description=embed.__doc__)
    parser.add_argument("tflite", type=Path)
    parser.add_argument("--schema", type=Path, required=True)
    parser.add_argument("--tflm-root", type=Path, required=True)
    parser.add_argument("--output-dir", type=Path, required=True)
    parser.add_argument("--int8-registrations", action="store_true")
    args = parser.parse_args(argv)
    embed(args.tflite, args.schema, args.tflm_root, args.output_dir, args.int8_registrations)
    return 0


if __name__ == "__main__":
    sys.exit(main())
