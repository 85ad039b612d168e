"""The ATen (and quantize/dequantize) operators every stage names, by family, each listed once:
the quantizer annotates them, the lowering's rules match them, the precision table and the
reports classify them.

* Element-wise functions ``cortex_m_nn::lut`` computes as a table. ``ACTIVATIONS`` fold into
  a producer's output range where they can and are a table elsewhere; ``LOOKUP`` are always a
  table. ``INT16_TABLES`` are the ones with an int16 case (``ops/lut.py``'s interpolated
  table).
* Ops that keep their input's quantization: ``POOLS``, ``VIEWS`` and ``TRANSPOSES``, and all
  of ``SHARING``.
* The layers with weights (``CONVOLUTIONS``, ``TRANSPOSED_CONVOLUTIONS``, ``LINEARS``), products
  of activations (``MATMULS``), element-wise arithmetic and the other families the quantizer
  annotates.
* ``QUANTIZE``, ``DEQUANTIZE`` and ``DEQUANTIZE_PER_CHANNEL``: PT2E's quantize/dequantize ops.
"""

from __future__ import annotations

import torch

# Registers the quantized_decomposed operators (PT2E's quantize/dequantize) with torch, which
# otherwise happens only once something imports PT2E: the handles below need them.
import torch.ao.quantization.fx._decomposed  # noqa: F401

from cortex_m_nn.core.float_ops import SOFTSIGN

aten = torch.ops.aten
#: The namespace of the float operators the model's own layers become (``cortex_m_nn.nn``).
FLOAT_NAMESPACE = "cortex_m_nn_float"
quantized_decomposed = torch.ops.quantized_decomposed


#: Views: the same elements in another shape.
VIEWS = (
    aten.flatten.using_ints,
    aten.view.default,
    aten.reshape.default,
    aten.squeeze.default,
    aten.squeeze.dim,
    aten.squeeze.dims,
    aten.unsqueeze.default,
)
#: Transposing ops: the same elements in another order.
TRANSPOSES = (
    aten.permute.default,
    aten.transpose.int,
    aten.t.default,
    aten.numpy_T.default,
    aten.mT.default,
    aten.swapaxes.default,
    aten.swapdims.default,
)
#: Pools: their output reuses the input's quantization parameters and a following activation
#: becomes their output clamp (the activation's output then shares those parameters).
POOLS = {
    aten.avg_pool2d.default,
    aten.adaptive_avg_pool2d.default,
    aten.mean.dim,
    aten.max_pool2d.default,
    aten.avg_pool1d.default,
    aten.adaptive_avg_pool1d.default,
    aten.max_pool1d.default,
}

#: Activations that fold into the producer's output range.
ACTIVATIONS = {
    aten.relu.default,
    aten.relu_.default,
    aten.hardtanh.default,
    aten.hardtanh_.default,
    aten.relu6.default,
    aten.clamp.default,
}

#: Element-wise functions lowered to a 256-entry table (cortex_m_nn::lut), each with its own
#: observed output quantization. Activations that cannot fuse into a producer are tables too.
LOOKUP = {
    SOFTSIGN,
    aten.sigmoid.default,
    aten.sigmoid_.default,
    aten.tanh.default,
    aten.tanh_.default,
    aten.hardswish.default,
    aten.hardswish_.default,
    aten.hardsigmoid.default,
    aten.hardsigmoid_.default,
    aten.gelu.default,
    aten.silu.default,
    aten.silu_.default,
    aten.leaky_relu.default,
    aten.leaky_relu_.default,
    aten.elu.default,
    aten.elu_.default,
    aten.mish.default,
    aten.mish_.default,
    aten.softplus.default,
    aten.celu.default,
    aten.celu_.default,
    aten.selu.default,
    aten.selu_.default,
    aten.log_sigmoid.default,
    aten.softshrink.default,
    aten.abs.default,
    aten.abs_.default,
    aten.neg.default,
    aten.neg_.default,
    aten.square.default,
    aten.pow.Tensor_Scalar,
    aten.pow_.Scalar,
    aten.sqrt.default,
    aten.sqrt_.default,
    aten.rsqrt.default,
    aten.rsqrt_.default,
    aten.exp.default,
    aten.exp_.default,
    aten.log.default,
    aten.log_.default,
    aten.reciprocal.default,
    aten.reciprocal_.default,
    aten.erf.default,
    # a tensor and a number: x / c, 1 - x (x * c and x + c stay cortex_m_nn::mul / add)
    aten.div.Tensor,
    aten.div_.Tensor,
    aten.div.Scalar,
    aten.rsub.Scalar,
}

#: Functions whose value or slope is unbounded at 0 (or that are undefined below it).
UNBOUNDED_AT_ZERO = {
    aten.sqrt.default,
    aten.sqrt_.default,
    aten.rsqrt.default,
    aten.rsqrt_.default,
    aten.log.default,
    aten.log_.default,
    aten.reciprocal.default,
    aten.reciprocal_.default,
    aten.pow.Tensor_Scalar,
    aten.pow_.Scalar,
}
#: Functions whose int16 interpolated table would err by more than 16 LSB: sqrt, rsqrt, log,
#: reciprocal and powers (slope unbounded near 0); relu6, hardtanh, clamp and hardsigmoid
#: (kinks between knots; measured on a hardtanh: up to 451 LSB with 513 knots, 60 with 4,097).
#: PReLU (``PRELU`` in the quantizer) is int8 only too.
NO_INT16_TABLE = UNBOUNDED_AT_ZERO | {
    aten.relu6.default,
    aten.hardtanh.default,
    aten.hardtanh_.default,
    aten.clamp.default,
    aten.hardsigmoid.default,
    aten.hardsigmoid_.default,
}
#: Element-wise functions finite everywhere with a bounded slope: the quantizer's MSE ranges
#: measure a tensor's error after the one of them all its consumers apply
#: (``observers.MseObserver``'s ``through``). Not those unbounded at 0, which every range
#: holds, nor exp and square, whose slope grows without bound.
BOUNDED_SLOPE = (
    (LOOKUP | ACTIVATIONS)
    - UNBOUNDED_AT_ZERO
    - {
        aten.exp.default,
        aten.exp_.default,
        aten.square.default,
    }
)
#: Tables with an int16 case: the smooth functions, and relu, leaky relu and abs, whose one
#: kink, at 0, is a knot.
INT16_TABLES: frozenset[object] = frozenset((LOOKUP | ACTIVATIONS) - NO_INT16_TABLE)

#: Ops whose weights are quantized per output channel (axis 0 of the weight).
CONVOLUTIONS = {aten.conv2d.default, aten.conv1d.default}
CONVOLUTIONS |= {aten.conv2d.padding, aten.conv1d.padding}  # padding="same" or "valid"
#: Transposed convolutions: per output channel is axis 1 of their weight.
TRANSPOSED_CONVOLUTIONS = {aten.conv_transpose2d.input, aten.conv_transpose1d.default}
LINEARS = {aten.linear.default}
#: Products of two activations (or an activation and a constant); each operand per tensor.
MATMULS = {aten.matmul.default, aten.bmm.default, aten.mm.default}
#: Element-wise ops with their own output quantization.
BINARY = {aten.add.Tensor, aten.sub.Tensor, aten.mul.Tensor}
#: Element-wise ops that cannot requantize: both inputs and the output share one quantization.
MINMAX = {aten.minimum.default, aten.maximum.default}
#: Gathers (lower/rules/movement.py): a view, one transpose or one strided copy each.
MOVEMENT = {
    aten.slice.Tensor,
    aten.narrow.default,
    aten.select.int,
    aten.expand.default,
    aten.repeat.default,
    aten.flip.default,
    aten.pixel_shuffle.default,
    aten.pixel_unshuffle.default,
    aten.unflatten.int,
    aten.movedim.int,
    aten.movedim.intlist,
}
#: Nearest and bilinear upsampling (cortex_m_nn::resize): the output shares the input's
#: quantization (bilinear values are convex combinations of the input's, so they fit).
RESIZES = {
    aten.upsample_nearest2d.vec,
    aten.upsample_nearest2d.default,
    aten._upsample_nearest_exact2d.vec,
    aten._upsample_nearest_exact2d.default,
    aten.upsample_bilinear2d.vec,
    aten.upsample_bilinear2d.default,
}
#: Their 1-D forms on [N, C, L] (linear is bilinear of height 1).
RESIZES_1D = {
    aten.upsample_nearest1d.vec,
    aten.upsample_nearest1d.default,
    aten._upsample_nearest_exact1d.vec,
    aten._upsample_nearest_exact1d.default,
    aten.upsample_linear1d.vec,
    aten.upsample_linear1d.default,
}
RESIZES |= RESIZES_1D
#: Data movement: the output reuses the input's quantization parameters (no requantization).
SHARING = (
    POOLS
    | set(VIEWS)
    | set(TRANSPOSES)
    | {aten.dropout.default, aten.constant_pad_nd.default, aten.pad.default}
    | RESIZES
    | MOVEMENT
)
#: Concatenation: all inputs and the output share one observer (the first input's).
CONCATENATIONS = {aten.cat.default, aten.concat.default}
SOFTMAX = {aten.softmax.int, aten._softmax.default}
#: Reductions with their own output quantization (sums); amax, amin and a mean over all
#: elements share their input's, like the pools (a mean over dims is in POOLS).
SUMS = {aten.sum.dim_IntList, aten.sum.default}
SHARING |= {aten.amax.default, aten.amin.default, aten.mean.default}
#: Normalizations (cortex_m_nn::layer_norm): int8 input and output (its own observer); the
#: float weight and bias are folded into the kernel's parameters at compile time.
NORMS = {aten.layer_norm.default, aten.group_norm.default}
#: PReLU: a table per slope (one, or one per channel); the slopes are constant parameters.
PRELU = {aten.prelu.default}

#: PT2E's quantize and dequantize operators around every quantized value.
QUANTIZE = {quantized_decomposed.quantize_per_tensor.default}
DEQUANTIZE = {quantized_decomposed.dequantize_per_tensor.default}
DEQUANTIZE_PER_CHANNEL = {quantized_decomposed.dequantize_per_channel.default}
