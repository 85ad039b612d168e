"""The PT2E quantizer: annotates exactly the patterns cortex_m_nn lowers onto CMSIS-NN.

Anything it does not annotate stays in float; the lowering then reports it as a fallback
(or refuses it), so what is quantized here and what is lowered can never disagree.
"""

from __future__ import annotations

import math

import torch
from torch.fx import GraphModule, Node
from torchao.quantization.pt2e.quantizer import (
    FixedQParamsQuantizationSpec,
    QuantizationAnnotation,
    QuantizationSpec,
    QuantizationSpecBase,
    Quantizer,
    SharedQuantizationSpec,
)

from cortex_m_nn.core.families import (
    ACTIVATIONS,
    BINARY,
    BOUNDED_SLOPE,
    CONCATENATIONS,
    CONVOLUTIONS,
    LINEARS,
    LOOKUP,
    MATMULS,
    MINMAX,
    NORMS,
    POOLS,
    PRELU,
    SHARING,
    SOFTMAX,
    SUMS,
    TRANSPOSED_CONVOLUTIONS,
)
from cortex_m_nn.core.float_ops import MASKED_SOFTMAX
from cortex_m_nn.core.graph import constant_arguments, scaled_product, swaps_last_two_dims
from cortex_m_nn.core.options import Activations, QuantizationOptions, RangeMethod, Weights
from cortex_m_nn.core.precision import (
    SHARING_INT16,
    has_int16_case,
    int4_case,
    int16_case,
    sums_fit,
)
from cortex_m_nn.frontend.states import is_cell_value, kept_state
from cortex_m_nn.nn import SVDF_OPS
from cortex_m_nn.quantize import config
from cortex_m_nn.quantize.batch_norm import unfold_batch_norms
from cortex_m_nn.quantize.decompose import decompose_movement
from cortex_m_nn.quantize.fake_quant import fake_quantize_annotations
from cortex_m_nn.quantize.gru import GRU, split_grus
from cortex_m_nn.quantize.recurrent import LSTM, LSTM_CELL, split_lstms
from cortex_m_nn.quantize.svdf import svdf_annotation

aten = torch.ops.aten


def _annotate(
    node: Node,
    inputs: dict[Node, QuantizationSpecBase | None],
    output: QuantizationSpecBase | None,
) -> None:
    node.meta["quantization_annotation"] = QuantizationAnnotation(
        input_qspec_map=inputs, output_qspec=output, _annotated=True
    )


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _is_annotated(node: Node) -> bool:
    annotation = node.meta.get("quantization_annotation")
    return annotation is not None and annotation._annotated


def _resolved_output(source: Node) -> QuantizationSpecBase | None:
    """The spec that owns the observer of ``source``'s output (sharing followed back), None
    when it is not annotated."""
    annotation = source.meta.get("quantization_annotation")
    output = getattr(annotation, "output_qspec", None)
    for _ in range(1000):  # follow sharing back to the spec that owns the observer
        if not isinstance(output, SharedQuantizationSpec):
            break
        shared = output.edge_or_node
        if isinstance(shared, Node):
            output = shared.meta["quantization_annotation"].output_qspec
        else:
            producer, consumer = shared
            output = consumer.meta["quantization_annotation"].input_qspec_map.get(producer)
    return output


def _input_spec(source: Node, activation: QuantizationSpec) -> QuantizationSpecBase:
    """How a data-movement op observes its input: a producer with fixed output quantization
    (softmax) of ``activation``'s dtype keeps it, so PT2E shares that instead of inserting a
    requantization, as does a kept state's symmetric one (:func:`_kept_spec`); otherwise
    ``activation`` (another dtype: PT2E requantizes)."""
    output = _resolved_output(source)
    if isinstance(output, FixedQParamsQuantizationSpec) and output.dtype == activation.dtype:
        return output
    return _kept_spec(source, activation)


def _kept_spec(source: Node, activation: QuantizationSpec) -> QuantizationSpecBase:
    """How a layer that takes any zero point (a recurrent, linear or convolution layer)
    observes its input: a producer quantized symmetric for a kept state (a streaming layer's
    output) of ``activation``'s dtype is read as it is, where ``activation`` would requantize
    it to a grid no finer."""
    output = _resolved_output(source)
    if output is config.ACTIVATION_SYMMETRIC and output.dtype == activation.dtype:
        return SharedQuantizationSpec(source)
    return activation


def _finite_pad(node: Node) -> bool:
    """False for a pad with a non-finite constant: the shared observer sees the padded tensor,
    and no scale covers ±inf, so such a pad stays float (reported as a fallback)."""
    if node.target is aten.constant_pad_nd.default:
        value = node.args[2] if len(node.args) > 2 else node.kwargs.get("value", 0.0)
    elif node.target is aten.pad.default:
        value = node.args[3] if len(node.args) > 3 else node.kwargs.get("value")
    else:
        return True
    return value is None or math.isfinite(float(value))


def fusable_activation(node: Node) -> Node | None:
    """The activation that alone consumes ``node``'s output and can become its clamp range."""
    users = [u for u in node.users if u.op != "output"]
    if len(node.users) != 1 or len(users) != 1:
        return None
    user = users[0]
    if user.op != "call_function" or user.target not in ACTIVATIONS or _is_annotated(user):
        return None
    return user if constant_arguments(user) else None


def _constant(model: GraphModule, node: object) -> torch.Tensor | None:
    """The tensor a ``get_attr`` node reads (a parameter, buffer or constant), else None."""
    if not isinstance(node, Node) or node.op != "get_attr":
        return None
    value = model
    for name in str(node.target).split("."):
        value = getattr(value, name, None)
    return value if isinstance(value, torch.Tensor) else None


class CortexMQuantizer(Quantizer):
    """int8 weights (per-channel for convolutions) and int8 activations for CMSIS-NN; with
    ``activations=INT16``, int16 activations for every op that has an int16 case."""

    def __init__(self, options: QuantizationOptions | None = None, qat: bool = False) -> None:
        super().__init__()
        self.options = options or QuantizationOptions()
        #: for quantization-aware training: fake quantizers instead of observers (``qat``)
        self.qat = qat
        #: The activation spec of every annotation (one instance: its observer per tensor).
        self.activation = config.activation_spec(self.options.ranges)
        #: the graph being annotated (its constants decide a linear layer's precision)
        self.model: GraphModule | None = None

    def transform_for_annotation(self, model: GraphModule) -> GraphModule:
        """Before annotation: splits, stacks and rolls as single-output data movement
        (``decompose``); each ``nn.LSTM`` and ``nn.GRU`` layer as one node (``recurrent``,
        ``gru``); batch norms no convolution absorbed as depthwise 1×1 convolutions
        (``batch_norm``)."""
        return unfold_batch_norms(decompose_movement(split_grus(split_lstms(model))))

    def annotate(self, model: GraphModule) -> GraphModule:
        self._annotate_patterns(model)
        if self.qat:
            fake_quantize_annotations(model)
        return model

    def _annotate_patterns(self, model: GraphModule) -> None:
        self.model = model
        for node in model.graph.nodes:
            if node.op != "call_function" or _is_annotated(node):
                continue
            target = node.target
            spec = self._spec(node)
            if target in CONVOLUTIONS | LINEARS | TRANSPOSED_CONVOLUTIONS:
                self._annotate_weighted(node, self._weight_spec(model, node), spec)
            elif target in MATMULS:
                self._annotate_matmul(node, spec)
            elif target in BINARY:
                tensors = [a for a in node.args[:2] if isinstance(a, Node)]
                numbers = [a for a in node.args[:2] if not isinstance(a, Node)]
                if (
                    tensors
                    and all(_is_number(n) for n in numbers)
                    and node.kwargs.get("alpha", 1) == 1
                ):
                    self._annotate_with_output(node, dict.fromkeys(tensors, spec), spec)
            elif target in MINMAX:
                first, second = node.args[:2]
                if isinstance(first, Node) and isinstance(second, Node):
                    shared = SharedQuantizationSpec((first, node))
                    inputs = {first: spec}
                    if second is not first:
                        inputs[second] = shared
                    _annotate(node, inputs, shared)
            elif target in SHARING:
                source = node.args[0]
                if isinstance(source, Node) and _finite_pad(node):
                    self._annotate_sharing(node, source, spec)
            elif target in CONCATENATIONS:
                self._annotate_concatenation(node, spec)
            elif target in SUMS:
                source = node.args[0]
                if isinstance(source, Node):  # no fused activation: the kernel has no range
                    _annotate(node, {source: spec}, spec)
            elif target in SOFTMAX or target is MASKED_SOFTMAX:
                self._annotate_softmax(node, spec)
            elif target in NORMS:
                if isinstance(node.args[0], Node):
                    self._annotate_with_output(node, {node.args[0]: spec}, spec)
            elif target in LOOKUP or target in ACTIVATIONS:
                # An activation reaching here did not fuse into its producer (annotated
                # nodes are skipped): like the other tables, its output gets its own range.
                source = node.args[0]
                if isinstance(source, Node) and constant_arguments(node):
                    inputs = {source: self._through_consumers(source, spec)}
                    self._annotate_with_output(node, inputs, spec)
            elif target in (LSTM, LSTM_CELL, GRU) or target in SVDF_OPS:
                self._annotate_recurrent(node, spec)
            elif target in PRELU:
                source, slopes = node.args[:2]
                if isinstance(source, Node) and getattr(slopes, "op", None) == "get_attr":
                    self._annotate_with_output(node, {source: spec}, spec)

    def _annotate_sharing(self, node: Node, source: Node, spec: QuantizationSpec) -> None:
        """Output quantized like the input; a pool's activation shares it too (fused clamp).
        A kept state's slice, or an LSTM's ``c_n``, stays the float it holds."""
        if kept_state(node) is not None or is_cell_value(node):
            return
        shared = SharedQuantizationSpec((source, node))
        inputs = {source: _input_spec(source, spec)}
        activation = fusable_activation(node) if node.target in POOLS else None
        if activation is None:
            _annotate(node, inputs, shared)
        else:
            _annotate(node, inputs, None)
            _annotate(activation, {}, shared)

    def _annotate_concatenation(self, node: Node, spec: QuantizationSpec) -> None:
        """One observer for every input and the output: the copies need no requantization.
        An LSTM's ``c_n`` (its layers' final cell states) stays the floats a kept state holds."""
        inputs = node.args[0]
        if not isinstance(inputs, list | tuple) or not all(isinstance(a, Node) for a in inputs):
            return
        if is_cell_value(node):
            return
        first = inputs[0]
        shared = SharedQuantizationSpec((first, node))
        specs: dict[Node, QuantizationSpecBase | None] = {first: _input_spec(first, spec)}
        for source in inputs[1:]:
            specs.setdefault(source, shared)
        _annotate(node, specs, shared)

    def _weight_spec(self, model: GraphModule, node: Node) -> QuantizationSpec:
        """A weighted op's weight spec: per output channel for convolutions; for a transposed
        one unless grouped (axis 1 then counts channels per group: per tensor, and the lowering
        refuses it with the reason); for linear as the options choose. With ``weights=INT4``,
        int4 where the op has an int4 case with int8 activations (``precision.int4_case``;
        linear per channel or per tensor as for int8, the rounding noise measured at 4 bits);
        likewise a layer ``int4_layers`` names. Their scales as ``int4_ranges`` says."""
        if self._int4(model, node):
            spec = config.WEIGHT_INT4_PER_CHANNEL
            if node.target in LINEARS:
                weight = _constant(model, node.args[1])
                spec = config.linear_weight_spec(weight, self.options.linear_weights, bits=4)
            return config.with_int4_ranges(spec, self.options.int4_ranges)
        if node.target in CONVOLUTIONS:
            return config.WEIGHT_PER_CHANNEL
        if node.target in LINEARS:
            weight = _constant(model, node.args[1])
            return config.linear_weight_spec(weight, self.options.linear_weights)
        grouped = len(node.args) > 6 and node.args[6] != 1
        return config.WEIGHT_PER_TENSOR if grouped else config.WEIGHT_PER_CHANNEL_TRANSPOSED

    def int4_weight_spec(self, model: GraphModule, node: Node) -> QuantizationSpec | None:
        """The int4 weight spec this quantizer gives ``node`` of ``model``; None: int8."""
        self.model = model
        return self._weight_spec(model, node) if self._int4(model, node) else None

    def _int4(self, model: GraphModule, node: Node) -> bool:
        chosen = node.name in self.options.int4_layers  # --weights auto's choice
        if self.options.weights is not Weights.INT4 and not chosen:
            return False
        weight = _constant(model, node.args[1]) if len(node.args) > 1 else None
        return int4_case(node, weight) and self._spec(node) is not config.ACTIVATION_INT16

    def _annotate_weighted(
        self, node: Node, weight_spec: QuantizationSpec, spec: QuantizationSpec
    ) -> None:
        """Input and output as ``spec``; the bias int32 for int8 activations, left float for
        int16 (the lowering rounds it to int64)."""
        source, weight = node.args[0], node.args[1]
        bias = node.args[2] if len(node.args) > 2 else node.kwargs.get("bias")
        if not isinstance(source, Node) or not isinstance(weight, Node):
            return
        inputs: dict[Node, QuantizationSpecBase | None] = {
            source: _kept_spec(source, spec),
            weight: weight_spec,
        }
        if isinstance(bias, Node) and spec is not config.ACTIVATION_INT16:
            per_channel = weight_spec.qscheme == torch.per_channel_symmetric
            inputs[bias] = config.bias_spec((source, node), (weight, node), per_channel)
        self._annotate_with_output(node, inputs, spec)

    def _annotate_softmax(self, node: Node, spec: QuantizationSpec) -> None:
        """The input as ``spec``, the output at the softmax's fixed quantization; a masked
        softmax is int8 (its boolean mask stays a constant of its own)."""
        int16 = spec is config.ACTIVATION_INT16 and node.target is not MASKED_SOFTMAX
        output = config.SOFTMAX_OUTPUT_INT16 if int16 else config.SOFTMAX_OUTPUT
        _annotate(node, {node.args[0]: spec if int16 else self.activation}, output)

    def _annotate_matmul(self, node: Node, spec: QuantizationSpec) -> None:
        """Both operands int8 per tensor; a transpose of the right operand shares its input's
        quantization, so the lowering can read through it (CMSIS-NN takes that operand
        transposed). A positive scale alone after the product (attention's ``· 1/√d``) is
        quantized in its place: the product's requantization applies it."""
        lhs, rhs = node.args[:2]
        if not isinstance(lhs, Node) or not isinstance(rhs, Node):
            return
        if swaps_last_two_dims(rhs) and not _is_annotated(rhs):
            source = rhs.args[0]
            _annotate(rhs, {source: spec}, SharedQuantizationSpec((source, rhs)))
        inputs = {lhs: _input_spec(lhs, spec), rhs: _input_spec(rhs, spec)}
        scale = scaled_product(node)
        if scale is not None and not _is_annotated(scale):  # its requantization takes it in
            _annotate(node, inputs, None)
            _annotate(scale, {}, self._through_consumers(scale, spec))
        else:
            self._annotate_with_output(node, inputs, spec)

    def _annotate_recurrent(self, node: Node, spec: QuantizationSpec) -> None:
        """An LSTM or GRU layer (:meth:`_annotate_layer`), an LSTM's final cell state or an SVDF
        step (``quantize/svdf``)."""
        if node.target is LSTM_CELL:  # its input quantized as its LSTM's; its output the float
            source = node.args[0]  # the kept state holds (only a write-back reads it)
            layers = [u for u in getattr(source, "users", ()) if u.target is LSTM]
            layers = [u for u in layers if u.args[3] is node.args[3]]
            if layers:
                _annotate(node, {source: SharedQuantizationSpec((source, layers[0]))}, None)
            return
        if node.target in (LSTM, GRU):
            self._annotate_layer(node, spec)
            return
        found = svdf_annotation(node, self.activation)
        if found is not None:
            self._annotate_with_output(node, *found)

    def _annotate_layer(self, node: Node, spec: QuantizationSpec) -> None:
        """An LSTM or GRU layer: input and hidden sequence as ``spec``; an initial hidden state
        quantized as the output (the kernel reads it as a step's output), an LSTM's initial
        cell state in int16 at the cell's scale. A kept state (``nn.Streaming``) is the
        program's buffers, read as the floats they hold, and the output symmetric (its zero
        bytes at load are then zero)."""
        source, hidden = node.args[:2]
        if not isinstance(source, Node):
            return
        inputs: dict[Node, QuantizationSpecBase | None] = {source: _kept_spec(source, spec)}
        if kept_state(hidden) is not None:
            _annotate(node, inputs, config.ACTIVATION_SYMMETRIC)
            return
        if isinstance(hidden, Node):
            inputs[hidden] = SharedQuantizationSpec(node)
        cell = node.args[2] if node.target is LSTM else None
        if isinstance(cell, Node):
            inputs[cell] = config.cell_state_spec(int(node.args[8]))
        _annotate(node, inputs, spec)

    def _annotate_with_output(
        self,
        node: Node,
        inputs: dict[Node, QuantizationSpecBase | None],
        spec: QuantizationSpec,
    ) -> None:
        """Annotate ``node`` with output ``spec``; its output range goes to a fused activation
        when one follows."""
        activation = fusable_activation(node)
        if activation is None:
            _annotate(node, inputs, self._through_consumers(node, spec))
        else:
            _annotate(node, inputs, None)
            _annotate(activation, {}, spec)

    def _through_consumers(self, node: Node, spec: QuantizationSpec) -> QuantizationSpec:
        """``spec`` for ``node``'s output; with MSE ranges, when every consumer applies one
        element-wise function of bounded slope to it (``core.families.BOUNDED_SLOPE``: a table, or
        an activation that did not fuse), MSE ranges measured after that function
        (``config.activation_through``): the error its consumers pass on, not the tensor's
        own."""
        if spec is not self.activation or self.options.ranges is not RangeMethod.MSE:
            return spec
        users = list(node.users)
        first = users[0] if users else None
        if (
            first is None
            or first.op != "call_function"
            or first.target not in BOUNDED_SLOPE
            or first.args[0] is not node
            or not constant_arguments(first)
        ):
            return spec
        call = (first.target, first.args, first.kwargs)
        same = all(u.op == "call_function" and (u.target, u.args, u.kwargs) == call for u in users)
        return config.activation_through(first) if same else spec

    def _spec(self, node: Node) -> QuantizationSpec:
        """The activation spec of ``node``'s inputs and output: int16 when the options ask
        for int16 and its lowering has an int16 case for it (``precision.int16_case``; a
        linear layer with per-channel weights, which runs as an int16 1x1 convolution, also
        within that case's int32 bound), else int8."""
        everywhere = self.options.activations is Activations.INT16
        if not has_int16_case(node.target):
            return self.activation
        if node.target in SHARING_INT16:  # follows its input: never a requantization of its own
            if not int16_case(node, None) or not isinstance(node.args[0], Node):
                return self.activation
            source = _resolved_output(node.args[0])  # None: a model input (or a float op)
            int16 = (source is None and everywhere) or source is config.ACTIVATION_INT16
            return config.ACTIVATION_INT16 if int16 else self.activation
        if not everywhere and node.name not in self.options.int16_layers:
            return self.activation
        weight = _constant(self.model, node.args[1]) if len(node.args) > 1 else None
        if not int16_case(node, weight):
            return self.activation
        if node.target in LINEARS:
            choice = config.linear_weight_spec(weight, self.options.linear_weights)
            per_channel = choice.qscheme == torch.per_channel_symmetric
            if per_channel and (weight is None or not sums_fit(weight)):
                return self.activation
        return config.ACTIVATION_INT16

    def validate(self, model: GraphModule) -> None:
        """Every annotated graph is valid: unannotated ops are reported by the lowering."""


__all__ = ["CortexMQuantizer", "constant_arguments", "fusable_activation", "swaps_last_two_dims"]
