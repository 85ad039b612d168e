"""The PT2E quantizer: annotates exactly the patterns cortex_m_nn lowers onto CMSIS-NN.

Anything it does not annotate stays in float; the lowering then reports it as a fallback
(or refuses it), so what is quantized here and what is lowered can never disagree.
"""

from __future__ import annotations

import torch
from torch.fx import GraphModule, Node
from torchao.quantization.pt2e.quantizer import (
    QuantizationAnnotation,
    QuantizationSpecBase,
    Quantizer,
    SharedQuantizationSpec,
)

from cortex_m_nn.quantizer import config

aten = torch.ops.aten

#: Ops whose weights are quantized per output channel (axis 0 of the weight).
CONVOLUTIONS = {aten.conv2d.default}
LINEARS = {aten.linear.default}
#: Element-wise ops with their own output quantization.
BINARY = {aten.add.Tensor}
#: Activations that fold into the producer's output range.
ACTIVATIONS = {
    aten.relu.default,
    aten.relu_.default,
    aten.hardtanh.default,
    aten.hardtanh_.default,
    aten.relu6.default,
    aten.clamp.default,
}
#: Ops whose output reuses the input's quantization parameters (no requantization).
SHARING = {
    aten.avg_pool2d.default,
    aten.adaptive_avg_pool2d.default,
    aten.mean.dim,
    aten.flatten.using_ints,
    aten.view.default,
    aten.reshape.default,
    aten.squeeze.default,
    aten.squeeze.dim,
    aten.squeeze.dims,
    aten.unsqueeze.default,
    aten.dropout.default,
}
SOFTMAX = {aten.softmax.int, aten._softmax.default}


def _annotate(
    node: Node,
    inputs: dict[Node, QuantizationSpecBase | None],
    output: QuantizationSpecBase | None,
) -> None:
    node.meta["quantization_annotation"] = QuantizationAnnotation(
        input_qspec_map=inputs, output_qspec=output, _annotated=True
    )


def _is_annotated(node: Node) -> bool:
    annotation = node.meta.get("quantization_annotation")
    return annotation is not None and annotation._annotated


def fusable_activation(node: Node) -> Node | None:
    """The activation that alone consumes ``node``'s output and can become its clamp range."""
    users = [u for u in node.users if u.op != "output"]
    if len(node.users) != 1 or len(users) != 1:
        return None
    user = users[0]
    if user.op != "call_function" or user.target not in ACTIVATIONS or _is_annotated(user):
        return None
    if user.target is aten.clamp.default:
        bounds = list(user.args[1:3]) + [user.kwargs.get("min"), user.kwargs.get("max")]
        if any(isinstance(b, Node) for b in bounds):
            return None
    return user


class CortexMQuantizer(Quantizer):
    """int8 weights (per-channel for convolutions) and int8 activations for CMSIS-NN."""

    def annotate(self, model: GraphModule) -> GraphModule:
        for node in model.graph.nodes:
            if node.op != "call_function" or _is_annotated(node):
                continue
            target = node.target
            if target in CONVOLUTIONS or target in LINEARS:
                self._annotate_weighted(node, per_channel=target in CONVOLUTIONS)
            elif target in BINARY:
                if all(isinstance(a, Node) for a in node.args[:2]) and not node.kwargs.get("alpha"):
                    self._annotate_with_output(node, {a: config.ACTIVATION for a in node.args[:2]})
            elif target in SHARING:
                source = node.args[0]
                if isinstance(source, Node):
                    _annotate(
                        node,
                        {source: config.ACTIVATION},
                        SharedQuantizationSpec((source, node)),
                    )
            elif target in SOFTMAX:
                _annotate(node, {node.args[0]: config.ACTIVATION}, config.SOFTMAX_OUTPUT)
        return model

    def _annotate_weighted(self, node: Node, per_channel: bool) -> None:
        source, weight = node.args[0], node.args[1]
        bias = node.args[2] if len(node.args) > 2 else node.kwargs.get("bias")
        if not isinstance(source, Node) or not isinstance(weight, Node):
            return
        inputs: dict[Node, QuantizationSpecBase | None] = {
            source: config.ACTIVATION,
            weight: config.WEIGHT_PER_CHANNEL if per_channel else config.WEIGHT_PER_TENSOR,
        }
        if isinstance(bias, Node):
            inputs[bias] = config.bias_spec((source, node), (weight, node), per_channel)
        self._annotate_with_output(node, inputs)

    def _annotate_with_output(
        self, node: Node, inputs: dict[Node, QuantizationSpecBase | None]
    ) -> None:
        """Annotate ``node``; its output range goes to a fused activation when one follows."""
        activation = fusable_activation(node)
        if activation is None:
            _annotate(node, inputs, config.ACTIVATION)
        else:
            _annotate(node, inputs, None)
            _annotate(activation, {}, config.ACTIVATION)

    def validate(self, model: GraphModule) -> None:
        """Every annotated graph is valid: unannotated ops are reported by the lowering."""


__all__ = ["CortexMQuantizer", "fusable_activation"]
