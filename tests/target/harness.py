"""Compile models per core, build the bare-metal runner (tests/target/runner) and run it under
QEMU. Shared by tests/target and benchmarks/bench_target.py.

Needs ``EXECUTORCH_ROOT`` (an ExecuTorch source checkout), ``CMSIS_NN_PATH`` (a CMSIS-NN
checkout), Debian's ``arm-none-eabi-gcc`` and ``qemu-system-arm``, and flatbuffers ≥ 23:
``flatc`` (``FLATC_EXECUTABLE``, default the one in the executorch wheel) with its headers
(``FLATBUFFERS_INCLUDE_DIR``, default ``EXECUTORCH_ROOT/third-party/flatbuffers/include``).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch

from cortex_m_nn.check import vector as test_vector
from cortex_m_nn.core.options import IoType
from cortex_m_nn.core.target import Target
from cortex_m_nn.frontend.calibration import synthetic
from cortex_m_nn.frontend.model_source import ModelSource, load_model
from cortex_m_nn.frontend.states import fresh, has_states
from cortex_m_nn.ops.library import run_references
from cortex_m_nn.pipeline import CompiledProgram, compile_model

REPO = Path(__file__).resolve().parents[2]
RUNNER = REPO / "tests" / "target" / "runner"
TOOLCHAIN = REPO / "cmake" / "arm-none-eabi.cmake"
#: Where a package installed into a prefix keeps its CMake files (cmake/package.cmake).
PACKAGE_CMAKE = Path("share") / "cortex_m_nn" / "cmake"
PLUGIN_SOURCE = REPO / "benchmarks" / "qemu" / "plugin" / "insncount.c"


@dataclass(frozen=True)
class Core:
    name: str
    target: str
    cpu: str
    machine: str


#: The emulated cores: M55 with MVE, M33 and M4 with DSP, M3 scalar.
CORES = {
    "m55": Core("m55", "cortex-m55", "cortex-m55", "mps3-an547"),
    "m33": Core("m33", "cortex-m33", "cortex-m33", "mps2-an505"),
    "m4": Core("m4", "cortex-m4", "cortex-m4", "mps2-an386"),
    "m3": Core("m3", "cortex-m3", "cortex-m3", "mps2-an385"),
}


def _wheel_flatc() -> Path | None:
    try:
        import executorch
    except ImportError:
        return None
    flatc = Path(list(executorch.__path__)[0]) / "data" / "bin" / "flatc"
    return flatc if flatc.is_file() else None


def flatbuffers() -> tuple[Path | None, Path | None]:
    """(flatc, flatbuffers include dir) from the environment or the defaults."""
    flatc = os.environ.get("FLATC_EXECUTABLE")
    flatc_path = Path(flatc) if flatc else _wheel_flatc()
    include = os.environ.get("FLATBUFFERS_INCLUDE_DIR")
    if not include and os.environ.get("EXECUTORCH_ROOT"):
        include = str(Path(os.environ["EXECUTORCH_ROOT"]) / "third-party/flatbuffers/include")
    include_path = Path(include) if include else None
    if include_path and not (include_path / "flatbuffers" / "flatbuffers.h").is_file():
        include_path = None
    return flatc_path, include_path


def missing() -> str | None:
    """One line naming what the target tests lack, or None."""
    root = os.environ.get("EXECUTORCH_ROOT")
    if not root or not (Path(root) / "runtime" / "executor" / "program.h").is_file():
        return "EXECUTORCH_ROOT is not set to an ExecuTorch source checkout"
    cmsis = os.environ.get("CMSIS_NN_PATH")
    if not cmsis or not (Path(cmsis) / "Include" / "arm_nnfunctions.h").is_file():
        return "CMSIS_NN_PATH is not set to a CMSIS-NN checkout"
    for tool in ("arm-none-eabi-gcc", "qemu-system-arm", "cmake"):
        if not shutil.which(tool):
            return f"{tool} is not on PATH"
    flatc, include = flatbuffers()
    if flatc is None:
        return "no flatc: set FLATC_EXECUTABLE (flatbuffers >= 23, e.g. the executorch wheel's)"
    if include is None:
        return (
            "no flatbuffers headers: set FLATBUFFERS_INCLUDE_DIR (google/flatbuffers include/, "
            "same version as flatc)"
        )
    return None


# --- models -----------------------------------------------------------------------------------


#: model name → a factory of the source to use instead of the zoo's (a benchmark's substitute,
#: e.g. benchmarks/mlperf_weights.py's trained MLPerf weights, which the peers then compile too)
SOURCES: dict[str, Callable[[], ModelSource]] = {}


def model_source(name: str) -> ModelSource:
    """The model ``name`` compiles: a benchmark's substitute (``SOURCES``) or the zoo's."""
    return SOURCES[name]() if name in SOURCES else zoo_source(name)


def zoo_source(name: str) -> ModelSource:
    """The zoo's model ``name`` (seeded weights)."""
    from tests.target.models import INT8_IO, INT16

    name = INT8_IO.get(name, name)
    name = INT16[name][0] if name in INT16 else name
    if name == "ds_cnn":
        return load_model(None)
    from tests.target.models import MODELS

    module, example = MODELS[name]()
    return ModelSource(name, module, example)


def _timm_missing() -> str | None:
    from tests.coverage.architectures.timm_models import MISSING

    return MISSING


MODEL_NAMES = ["ds_cnn", "resnet8", "mobilenet_v1_025", "autoencoder"]
# issue 12: upsampling (resize), layer norm and group norm, grouped convolution, data movement
MODEL_NAMES += ["upsampling_decoder", "mobilevit_block", "regnetx_grouped", "shuffle_moves"]
# strided 1-D convolutions CMSIS-NN's MVE 1xN path refuses, per-channel PReLU, reductions
MODEL_NAMES += ["signal_1d"]
# the 1xN layouts CMSIS-NN's MVE path computes and the ones it does not (then arm_convolve_s8)
MODEL_NAMES += ["one_by_n"]
# the boundary kernels' vector paths on exact ties and saturating inputs (issue 15)
MODEL_NAMES += ["boundary"]
# int8 inputs and outputs, no boundary kernels (--io int8; tests/target/models.py INT8_IO)
MODEL_NAMES += ["ds_cnn_int8_io", "upsampling_decoder_int8_io"]
# int16 activations, alone and mixed with int8 (--activations int16; models.py INT16)
MODEL_NAMES += ["autoencoder_int16", "autoencoder_int16_per_channel", "precision_mix"]
MODEL_NAMES += ["ds_cnn_int16", "resnet8_int16", "ds_cnn_mixed", "autoencoder_mixed"]
# int16 batch matmuls, transposes and interpolated tables (an attention block)
MODEL_NAMES += ["attention_int16"]
# int4 weights (--weights int4; models.py INT16 lists them too: name → base model, options)
MODEL_NAMES += ["ds_cnn_int4", "int4_layers", "ds_cnn_int4_mixed"]
# LSTM layers (arm_lstm_unidirectional_s8): the zoo's keyword spotter, then time-major, two
# layers and an initial state
MODEL_NAMES += ["kws_lstm", "lstm_layers", "kws_lstm_int16"]
# GRU layers (our kernel on CMSIS-NN's LSTM building blocks): the zoo's keyword spotter, then
# time-major, two layers and an initial state; a transformer keyword spotter (nn.Transformer-
# EncoderLayer: scaled_dot_product_attention as batch matmuls and softmax)
MODEL_NAMES += ["kws_gru", "gru_layers", "kws_transformer"]
# a streaming GRU and LSTM (their states kept between inferences): two inferences, the second
# continuing
MODEL_NAMES += ["kws_gru_streaming", "kws_lstm_streaming"]
# masked attention (arm_softmax_s8 on each row's kept scores): a causal decoder layer
MODEL_NAMES += ["causal_decoder"]
# vision transformers of the coverage corpus: a ViT (sdpa, class token, layer scale) at 64x64
# and a MobileViT
MODEL_NAMES += ["vit", "mobilevit"]
# timm's own MobileViT-XXS (128x128) and ViT-Tiny (64x64, a 6 MB program), where timm is
# installed (tests/coverage/architectures/timm_models.py)
if _timm_missing() is None:
    MODEL_NAMES += ["timm_mobilevit_xxs", "timm_vit_tiny"]
# SVDF layers (int16 and int8 states): two inferences, the second from the first's states
MODEL_NAMES += ["svdf_kws"]
# a model trained with quantization in the loop (cortex_m_nn.prepare_qat: tests/qat_models.py)
MODEL_NAMES += ["qat_cnn"]


@dataclass
class ModelRun:
    name: str
    compiled: CompiledProgram
    #: what the program takes (float in the model's layout, or int8 as --io int8 stores it)
    inputs: tuple[torch.Tensor, ...]
    expected: list[torch.Tensor]
    #: a model with states (SVDF): the outputs of a second inference on the same inputs
    next_expected: list[torch.Tensor] | None = None


def compile_for(
    name: str, core: Core, seed: int = 3, io: IoType | None = None, schedule: str = "fast"
) -> ModelRun:
    """Compile ``name`` for ``core`` and compute the Python reference on seeded inputs; ``io``
    (default: int8 for the models of ``INT8_IO``, else float) as ``--io`` gives it;
    ``schedule``: the memory schedule."""
    from tests.target.models import INT8_IO, INT16, TARGET_INPUTS

    if io is None:
        io = IoType.INT8 if name in INT8_IO else IoType.FLOAT

    source = model_source(name)
    compiled = compile_model(
        source,
        Target.parse(core.target),
        synthetic(source.example_inputs, count=8),
        progress=False,
        io=io,
        options=INT16[name][1] if name in INT16 else None,
        schedule=schedule,
    )
    gen = torch.Generator().manual_seed(seed)
    inputs = tuple(torch.randn(x.shape, generator=gen) for x in source.example_inputs)
    if name in TARGET_INPUTS:  # inputs made for the program (e.g. on its rounding ties)
        inputs = TARGET_INPUTS[name](compiled.lowered, gen)
    io = compiled.io
    inputs = io.program_inputs(inputs)
    graph = fresh(io.graph)  # zero states: the program's first inference, then its second
    expected = [t.clone() for t in run_references(graph, inputs, compiled.abi.rounding)]
    following = None
    if has_states(graph):
        following = [t.clone() for t in run_references(graph, inputs, compiled.abi.rounding)]
    return ModelRun(name, compiled, inputs, expected, following)


def write_model(run: ModelRun, directory: Path) -> None:
    """``NAME.pte`` + ``NAME.test_vector.h`` (the inputs and expected outputs, as
    ``cortex-m-compile --test-vector`` writes them) for the runner's build."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / f"{run.name}.pte").write_bytes(run.compiled.pte)
    header = test_vector.c_header(list(run.inputs), run.expected, run.next_expected)
    (directory / f"{run.name}.test_vector.h").write_text(header)


# --- build and run ----------------------------------------------------------------------------


def build(
    core: Core,
    models_dir: Path,
    build_dir: Path,
    optimization: str = "-O3",
    runtime_optimization: str = "-Os",
    rounding: str = "double",
    extra: list[str] | None = None,
) -> Path:
    """Configure and build the runners for every model in ``models_dir``; returns build_dir.
    ``optimization``: the kernels', CMSIS-NN's and the runner's flags; ``runtime_optimization``:
    ExecuTorch's runtime's (the runner's RUNNER_RUNTIME_OPTIMIZATION); ``rounding``: the
    requantization rounding CMSIS-NN and the kernels are built with (CORTEX_M_NN_ROUNDING);
    ``extra``: further definitions (the loader's, tests/target/test_loader.py)."""
    flatc, include = flatbuffers()
    prefix = install_package(build_dir.with_name(build_dir.name + "-cortex_m_nn"))
    definitions = [
        f"-DCMAKE_PREFIX_PATH={prefix}",
        f"-DRUNNER_MODELS_DIR={models_dir}",
        f"-DRUNNER_OPTIMIZATION={optimization}",
        f"-DRUNNER_RUNTIME_OPTIMIZATION={runtime_optimization}",
        # no room over the runtime-overhead count: a count short by one byte fails load()
        "-DRUNNER_METHOD_MARGIN=0",
        # the lean image (issue 15): no log strings; each runner's kernel registry sized
        "-DEXECUTORCH_LOGGING=OFF",
        f"-DEXECUTORCH_ROOT={os.environ['EXECUTORCH_ROOT']}",
        f"-DCMSIS_NN_PATH={os.environ['CMSIS_NN_PATH']}",
        f"-DFLATC_EXECUTABLE={flatc}",
        f"-DFLATBUFFERS_INCLUDE_DIR={include}",
        f"-DCORTEX_M_NN_ROUNDING={rounding}",
        *(extra or []),
    ]
    cmake_build(
        RUNNER, build_dir, core, definitions, toolchain=prefix / PACKAGE_CMAKE / TOOLCHAIN.name
    )
    return build_dir


def install_package(prefix: Path) -> Path:
    """cortex-m-nn's CMake package installed into ``prefix`` from this checkout (configure, then
    ``cmake --install``), as a user installs it; the runner then finds it with find_package."""
    package_build = prefix.with_name(prefix.name + "-build")
    shutil.rmtree(prefix, ignore_errors=True)  # an install never removes a file a new one lacks
    _check(["cmake", "-S", str(REPO), "-B", str(package_build), f"-DCMAKE_INSTALL_PREFIX={prefix}"])
    _check(["cmake", "--install", str(package_build)])
    return prefix


def cmake_build(
    source: Path,
    build_dir: Path,
    core: Core,
    definitions: list[str],
    jobs: int | None = None,
    toolchain: Path = TOOLCHAIN,
) -> None:
    """Configure and build a bare-metal CMake project for ``core`` with the toolchain file
    (the checkout's, or an installed package's) and the runner's machine (the runner's and the
    benchmark peers' images are built alike); raises RuntimeError naming the first error line,
    then the output's tail."""
    configure = [
        "cmake",
        "-S",
        str(source),
        "-B",
        str(build_dir),
        f"-DCMAKE_TOOLCHAIN_FILE={toolchain}",
        f"-DCORTEX_M_NN_CPU={core.cpu}",
        f"-DRUNNER_MACHINE={core.machine}",
        f"-DPython3_EXECUTABLE={sys.executable}",
        *definitions,
    ]
    _check(configure)
    _check(["cmake", "--build", str(build_dir), "-j", str(jobs or os.cpu_count() or 1)])


def _check(command: list[str]) -> None:
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        lines = (done.stdout + done.stderr).splitlines()
        first = next((line.strip() for line in lines if "error" in line.lower()), "")
        tail = "\n".join(lines[-40:])
        raise RuntimeError(f"{' '.join(command[:3])} failed: {first}\n{tail}")


@dataclass
class Result:
    returncode: int
    stdout: str
    stderr: str

    def outputs(self) -> list[bytes]:
        return [
            bytes.fromhex(m.group(2))
            for m in re.finditer(r"^output (\d+) hex:([0-9a-f]*)$", self.stdout, re.M)
        ]

    def method_allocator_used(self) -> int | None:
        m = re.search(r"method allocator (\d+) of (\d+) B used", self.stdout)
        return int(m.group(1)) if m else None


def run(
    elf: Path,
    core: Core,
    plugin_args: str | None = None,
    timeout: float = 600,
    places: dict[int, Path] | None = None,
) -> Result:
    """Run ``elf`` on ``core``'s QEMU machine; ``plugin_args`` loads the insncount plugin;
    ``places``: files QEMU copies into memory, by address (``-device loader``)."""
    command = [
        "qemu-system-arm",
        "-M",
        core.machine,
        "-nographic",
        "-monitor",
        "none",
        "-serial",
        "none",
        "-semihosting-config",
        "enable=on,target=native",
        "-kernel",
        str(elf),
    ]
    for address, path in (places or {}).items():
        command += ["-device", f"loader,file={path},addr={address:#x},force-raw=on"]
    if plugin_args is not None:
        command += ["-plugin", plugin_args, "-d", "plugin"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
    return Result(done.returncode, done.stdout, done.stderr)


def output_bytes(tensors: list[torch.Tensor]) -> list[bytes]:
    return [t.contiguous().numpy().tobytes() for t in tensors]


def build_plugin(directory: Path) -> Path:
    """The insncount TCG plugin as a shared library (host gcc)."""
    directory.mkdir(parents=True, exist_ok=True)
    library = directory / "libinsncount.so"
    if not library.exists() or library.stat().st_mtime < PLUGIN_SOURCE.stat().st_mtime:
        _check(["gcc", "-O2", "-shared", "-fPIC", "-o", str(library), str(PLUGIN_SOURCE)])
    return library
