"""The MLPerf Tiny reference int8 models' trained weights and quantization, in our zoo models.

``bench_target.py --weights mlperf`` compiles the zoo's DS-CNN, ResNet-8, MobileNetV1-0.25 and
autoencoder (same layers and padding as MLPerf's Keras models) with the trained weights of the
``.tflite`` files TFLite Micro runs, and with every activation quantized as that file
quantizes it: the program is then the same integer network TFLM executes, so instruction
counts compare runtimes on the same CMSIS-NN work, and our outputs, run on TFLM's input
pattern, can be compared with TFLM's byte for byte. (With the zoo's seeded weights and
calibration, CMSIS-NN's data-dependent branches differ between the two programs by more than
the runtimes do.)

How: the float model gets each weight as ``scale * q`` and each bias as ``bias_scale * q``
(the ``.tflite``'s integers and scales). It is exported and PT2E-prepared with our quantizer
(no equalization, no bias correction: they would change the weights); then each observer
reports the ``.tflite``'s quantization instead of its own (the input, each convolution's,
linear's and add's output after its ReLU, each weight's per-channel or per-tensor scale);
``convert_pt2e`` derives the biases from those as always (the float model holds them in
float32, exact below 2**24 accumulator units; VWW's one dead channel, 1,073,741,760, lands 64
away, its output saturated either way). Layers are matched in order: the
i-th convolution or linear of the model is the i-th CONV_2D, DEPTHWISE_CONV_2D or
FULLY_CONNECTED of the file, the i-th add the i-th ADD; shapes are checked.

Reads the ``.tflite`` with TFLM's Python schema (``TFLM_ROOT``) and the ``flatbuffers``
package, as benchmarks/peer_tflm.py does. Benchmark code only.
"""

from __future__ import annotations

import copy
import importlib.util
import os
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

import numpy as np
import torch
from torch import nn
from torch.fx import GraphModule, Node
from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

from cortex_m_nn.core.options import IoType, LinearWeights, QuantizationOptions, RangeMethod
from cortex_m_nn.core.target import Target
from cortex_m_nn.frontend.calibration import synthetic
from cortex_m_nn.frontend.functional import functional_form
from cortex_m_nn.frontend.model_source import ModelSource
from cortex_m_nn.ops.library import run_references
from cortex_m_nn.pipeline import compile_quantized, export
from cortex_m_nn.quantize.quantizer import CortexMQuantizer

if TYPE_CHECKING:
    from tests.target import harness

from peer_tflm import MODELS  # noqa: E402 - our model → (benchmark, its .tflite)

SCHEMA = "tensorflow/lite/python/schema_py_generated.py"
WEIGHTED = ("CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED")
#: the ops whose output quantization a model's observers take, matched in order by kind
OBSERVED = (*WEIGHTED, "ADD")


@dataclass
class Quant:
    """A tensor's int8/int32 values (None for activations) and quantization."""

    shape: tuple[int, ...]
    scale: np.ndarray
    zero_point: np.ndarray
    values: np.ndarray | None = None


@dataclass
class Layer:
    """One operator of the file: its kind, inputs and output."""

    kind: str
    inputs: list[Quant | None]
    output: Quant
    #: a pool's (filter height, width, stride height, width)
    window: tuple[int, int, int, int] | None = None


@dataclass
class Reference:
    """A ``.tflite`` model: its input's quantization and its operators in order."""

    input: Quant
    layers: list[Layer]


def _schema(tflm_root: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location("tflm_schema", tflm_root / SCHEMA)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def read(path: Path, tflm_root: Path) -> Reference:
    """The file's one subgraph: its input and operators, with every tensor's quantization and
    the constant tensors' values."""
    schema = _schema(tflm_root)
    names = {v: k for k, v in vars(schema.BuiltinOperator).items() if not k.startswith("_")}
    model = schema.Model.GetRootAsModel(path.read_bytes(), 0)
    codes = [model.OperatorCodes(i) for i in range(model.OperatorCodesLength())]
    kinds = [names[max(c.BuiltinCode(), c.DeprecatedBuiltinCode())] for c in codes]
    graph = model.Subgraphs(0)
    types = {schema.TensorType.INT8: np.int8, schema.TensorType.INT32: np.int32}

    def tensor(index: int) -> Quant | None:
        if index < 0:
            return None
        t = graph.Tensors(index)
        q = t.Quantization()
        data = model.Buffers(t.Buffer()).DataAsNumpy()
        values = None
        if not isinstance(data, int) and t.Type() in types:  # 0: no buffer data
            values = data.view(types[t.Type()]).reshape(t.ShapeAsNumpy())
        return Quant(
            tuple(int(d) for d in t.ShapeAsNumpy()),
            q.ScaleAsNumpy() if q and q.ScaleLength() else np.zeros(0, np.float32),
            q.ZeroPointAsNumpy() if q and q.ZeroPointLength() else np.zeros(0, np.int64),
            values,
        )

    layers = []
    for i in range(graph.OperatorsLength()):
        op = graph.Operators(i)
        output = tensor(int(op.OutputsAsNumpy()[0]))
        assert output is not None
        inputs = [tensor(int(j)) for j in op.InputsAsNumpy()]
        layer = Layer(kinds[op.OpcodeIndex()], inputs, output)
        if layer.kind == "AVERAGE_POOL_2D":
            pool, table = schema.Pool2DOptions(), op.BuiltinOptions()
            pool.Init(table.Bytes, table.Pos)
            layer.window = (
                pool.FilterHeight(),
                pool.FilterWidth(),
                pool.StrideH(),
                pool.StrideW(),
            )
        layers.append(layer)
    source = tensor(int(graph.InputsAsNumpy()[0]))
    assert source is not None
    return Reference(source, layers)


def _weights(layer: Layer) -> tuple[torch.Tensor, torch.Tensor]:
    """(float weight in PyTorch's layout, float bias) of a weighted layer."""
    weight, bias = layer.inputs[1], layer.inputs[2]
    assert weight is not None and weight.values is not None
    assert bias is not None and bias.values is not None
    q = torch.from_numpy(weight.values.astype(np.float64))
    if layer.kind == "CONV_2D":  # OHWI → OIHW
        q = q.permute(0, 3, 1, 2)
    elif layer.kind == "DEPTHWISE_CONV_2D":  # [1, KH, KW, C] → [C, 1, KH, KW]
        q = q.permute(3, 0, 1, 2)
    scale = torch.from_numpy(weight.scale.astype(np.float64))  # per output channel or tensor
    float_weight = q * scale.view([-1] + [1] * (q.dim() - 1))
    float_bias = torch.from_numpy(bias.values.astype(np.float64)) * _bias_scale(layer).double()
    return float_weight.float(), float_bias.float()


def _bias_scale(layer: Layer) -> torch.Tensor:
    """input scale × weight scale(s), in float32 as our quantizer derives the bias scale."""
    source, weight = layer.inputs[0], layer.inputs[1]
    assert source is not None and weight is not None
    return torch.tensor(source.scale, dtype=torch.float32) * torch.tensor(
        weight.scale, dtype=torch.float32
    )


def load_pools(module: nn.Module, reference: Reference) -> None:
    """Give every ``nn.AvgPool2d`` the file's window, in order: the trained KWS file pools all
    25 rows of DS-CNN's 25×5 map, where the Keras code it was published with pools 24."""
    ours = [m for m in module.modules() if isinstance(m, nn.AvgPool2d)]
    theirs = [x.window for x in reference.layers if x.kind == "AVERAGE_POOL_2D"]
    for mine, window in zip(ours, theirs[: len(ours)], strict=True):
        assert window is not None
        mine.kernel_size, mine.stride = window[:2], window[2:]


def load_weights(module: nn.Module, reference: Reference) -> None:
    """Set every convolution's and linear's weight and bias to the file's, in order."""
    ours = [m for m in module.modules() if isinstance(m, nn.Conv2d | nn.Linear)]
    theirs = [layer for layer in reference.layers if layer.kind in WEIGHTED]
    if len(ours) != len(theirs):
        raise ValueError(f"{len(ours)} weighted layers, the file has {len(theirs)}")
    with torch.no_grad():
        for mine, layer in zip(ours, theirs, strict=True):
            weight, bias = _weights(layer)
            if tuple(mine.weight.shape) != tuple(weight.shape):
                raise ValueError(
                    f"{layer.kind} weight {tuple(weight.shape)} against {tuple(mine.weight.shape)}"
                )
            mine.weight.copy_(weight)
            assert mine.bias is not None
            mine.bias.copy_(bias)


# --- the file's quantization in place of our observers' ----------------------------------------


def _is_observer(node: object) -> bool:
    return (
        isinstance(node, Node)
        and node.op == "call_module"
        and "activation_post_process" in str(node.target)
    )


def _output_observer(node: Node) -> Node:
    """The observer of ``node``'s output, after a ReLU the op fuses."""
    while True:
        (user,) = node.users
        if _is_observer(user):
            return user
        if user.target not in (torch.ops.aten.relu.default, torch.ops.aten.relu_.default):
            raise ValueError(f"{node.name}'s output reaches {user.name}, not an observer")
        node = user


def _fix(observer: nn.Module, scale: np.ndarray, zero_point: np.ndarray) -> None:
    """Make ``observer`` report this quantization (per channel when it observes per channel)."""
    per_channel = (torch.per_channel_symmetric, torch.per_channel_affine)
    channels = getattr(observer, "qscheme", None) in per_channel
    s = torch.tensor(scale, dtype=torch.float32)
    z = torch.tensor(zero_point, dtype=torch.int32)
    if not channels:
        if s.numel() != 1:
            raise ValueError(f"a per-tensor observer for {s.numel()} scales")
        s, z = s.reshape(1), z.reshape(1)

    def qparams() -> tuple[torch.Tensor, torch.Tensor]:
        return s.clone(), z.clone()

    observer.calculate_qparams = qparams  # type: ignore[method-assign]


def _targets(graph: GraphModule) -> dict[str, list[Node]]:
    """The prepared graph's ops by the file's kind, in order."""
    kinds: dict[str, list[Node]] = {"WEIGHTED": [], "ADD": []}
    aten = torch.ops.aten
    for node in graph.graph.nodes:
        if node.target in (aten.conv2d.default, aten.linear.default):
            kinds["WEIGHTED"].append(node)
        elif node.target in (aten.add.Tensor, aten.add_.Tensor):
            kinds["ADD"].append(node)
    return kinds


def fix_quantization(prepared: GraphModule, reference: Reference) -> None:
    """Every observer the file's layers correspond to reports the file's quantization."""
    placeholder = next(n for n in prepared.graph.nodes if n.op == "placeholder")
    (observer,) = [u for u in placeholder.users if _is_observer(u)]
    _fix(prepared.get_submodule(observer.target), reference.input.scale, reference.input.zero_point)
    ours = _targets(prepared)
    theirs = {
        "WEIGHTED": [x for x in reference.layers if x.kind in WEIGHTED],
        "ADD": [x for x in reference.layers if x.kind == "ADD"],
    }
    for kind, nodes in ours.items():
        if len(nodes) != len(theirs[kind]):
            raise ValueError(f"{len(nodes)} {kind} ops, the file has {len(theirs[kind])}")
        for node, layer in zip(nodes, theirs[kind], strict=True):
            out = _output_observer(node)
            _fix(prepared.get_submodule(out.target), layer.output.scale, layer.output.zero_point)
            if kind == "WEIGHTED":
                weight = layer.inputs[1]
                assert weight is not None and _is_observer(node.args[1])
                _fix(prepared.get_submodule(node.args[1].target), weight.scale, weight.zero_point)


def quantized(source: ModelSource, reference: Reference) -> tuple[GraphModule, GraphModule]:
    """(float graph, converted graph) as ``compile.quantize`` returns them, with the file's
    quantization; ``source.module`` must hold the file's weights (:func:`load_weights`)."""
    exported = export(source)
    functional_form(exported)
    float_graph = copy.deepcopy(exported)
    options = QuantizationOptions(  # the file's weights: per tensor where it has one scale
        ranges=RangeMethod.MINMAX, equalize=False, linear_weights=LinearWeights.PER_TENSOR
    )
    prepared = prepare_pt2e(exported, CortexMQuantizer(options))
    with torch.no_grad():
        prepared(*source.example_inputs)
    fix_quantization(prepared, reference)
    return float_graph, convert_pt2e(prepared)


def tflm_input(shape: tuple[int, ...]) -> torch.Tensor:
    """TFLM's benchmark input (benchmarks/peer_tflm/main.cc ``fill``): a 32-bit LCG's high byte,
    seed 12345, one byte per element in storage order."""
    state, values = 12345, []
    for _ in range(int(np.prod(shape))):
        state = (state * 1664525 + 1013904223) & 0xFFFFFFFF
        values.append(state >> 24)
    return torch.tensor(values, dtype=torch.uint8).view(torch.int8).reshape(shape)


def status() -> str:
    """'' when the MLPerf files can be read, else why not."""
    for variable, probe in (("TFLM_ROOT", SCHEMA), ("MLPERF_TINY_ROOT", "benchmark/training")):
        root = os.environ.get(variable)
        if not root or not (Path(root) / probe).exists():
            return f"{variable} is not set to a checkout with {probe}"
    if importlib.util.find_spec("flatbuffers") is None:
        return "the flatbuffers Python package is not installed"
    return ""


# --- a benchmark run of the trained model ------------------------------------------------------


def reference(name: str) -> Reference:
    """The MLPerf file of our model ``name`` (benchmarks/peer_tflm.py ``MODELS``), read."""
    root = Path(os.environ["MLPERF_TINY_ROOT"])
    return read(root / MODELS[name][1], Path(os.environ["TFLM_ROOT"]))


def trained_source(name: str, ref: Reference) -> ModelSource:
    """The zoo's ``name`` with the file's weights; its example input is TFLM's input pattern
    dequantized with the file's input quantization, in the model's layout (NCHW)."""
    from tests.target import harness

    zoo = harness.zoo_source(name)
    load_weights(zoo.module, ref)
    load_pools(zoo.module, ref)
    (example,) = zoo.example_inputs
    stored = example.permute(0, 2, 3, 1) if example.dim() == 4 else example  # NHWC as TFLM's
    q = tflm_input(tuple(stored.shape)).to(torch.float32)
    scale, zero_point = float(ref.input.scale[0]), float(ref.input.zero_point[0])
    x = (q - zero_point) * scale
    x = x.permute(0, 3, 1, 2).contiguous() if example.dim() == 4 else x
    return ModelSource(name, zoo.module, (x,))


def compile_run(
    name: str, core: harness.Core, io: IoType | None, schedule: str = "fast"
) -> harness.ModelRun:
    """``harness.compile_for`` of the trained model (int8 I/O unless ``io`` says otherwise)
    on TFLM's input, in memory ``schedule``; ``harness.SOURCES`` gets it too, so the peers
    compile the same model."""
    from tests.target import harness

    ref = reference(name)
    harness.SOURCES[name] = lambda: trained_source(name, ref)
    source = harness.model_source(name)
    compiled = compile_quantized(
        source,
        Target.parse(core.target),
        synthetic(source.example_inputs, count=1),
        quantized(source, ref),
        io=io or IoType.INT8,
        schedule=schedule,
    )
    inputs = compiled.io.program_inputs(source.example_inputs)
    if compiled.io.type is IoType.INT8:
        (x,) = inputs
        assert torch.equal(x, tflm_input(tuple(x.shape))), "the input is not TFLM's pattern"
    expected = run_references(compiled.io.graph, inputs, compiled.abi.rounding)
    return harness.ModelRun(name, compiled, inputs, [t.clone() for t in expected])
