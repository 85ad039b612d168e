"""Which ops compute in int16 when the activations are int16: one table the quantizer and the
lowering share, so what is quantized in int16 and what is lowered in int16 cannot disagree.

With ``--activations int16`` (``options.Activations.INT16``) the quantizer gives an op in
:data:`INT16_OPS` int16 inputs and output (symmetric, zero point 0, 8-bit weights: CMSIS-NN's
s16 kernels) and every other op int8; PT2E then puts a requantization on each edge where the
precision changes, and the lowering makes it a ``cortex_m_nn::requantize`` call. An op joins
the table when its lowering rule has an int16 case (``docs/int16.md`` lists what CMSIS-NN
offers); a fused activation (ReLU, ReLU6, clamp) is the op's output clamp and follows it.
"""

from __future__ import annotations

import math

import torch
from torch.fx import Node

from cortex_m_nn.core.families import CONVOLUTIONS, INT16_TABLES, POOLS, VIEWS
from cortex_m_nn.core.float_ops import LSTM

aten = torch.ops.aten

#: ATen targets whose lowering has an int16-activation case (for some of their calls:
#: :func:`int16_case` says which).
INT16_OPS: frozenset[object] = frozenset(
    {
        aten.linear.default,  # cortex_m_nn::linear, arm_fully_connected_s16
        # cortex_m_nn::batch_matmul, arm_batch_matmul_s16 (16x16: both operands int16)
        aten.matmul.default,
        aten.bmm.default,
        aten.mm.default,
        # cortex_m_nn::conv2d (arm_convolve_wrapper_s16: groups 1 only) and
        # cortex_m_nn::depthwise_conv2d (arm_depthwise_conv_wrapper_s16)
        aten.conv2d.default,
        aten.conv2d.padding,
        aten.conv1d.default,
        aten.conv1d.padding,
        # cortex_m_nn::softmax (arm_softmax_s16): rows of two or more
        aten.softmax.int,
        aten._softmax.default,
        # cortex_m_nn::add (arm_elementwise_add_s16; sub negates a multiplier), ::mul
        aten.add.Tensor,
        aten.sub.Tensor,
        aten.mul.Tensor,
        LSTM,  # cortex_m_nn::lstm, arm_lstm_unidirectional_s16 (int64 biases)
    }
)
#: Element-wise functions whose int16 case is ``cortex_m_nn::lut``'s interpolated table
#: (``core.families.INT16_TABLES``: the smooth ones; see ``core.families.NO_INT16_TABLE`` for
#: the others).
INT16_OPS = INT16_OPS | INT16_TABLES
#: Ops whose output shares their input's quantization (pools, views): int16 when their input
#: is (``quantizer._spec``), never a requantization of their own. Pools: the ``_s16`` kernels
#: (a mean only over H, W or L: other dims are cortex_m_nn::reduce, int8 only). Views and eval
#: dropout: no kernel, or a ``transpose``, which has an int16 case; constant pads: ``pad``'s
#: int16 case (or folded into an int16 convolution's padding).
SHARING_INT16: frozenset[object] = frozenset(
    POOLS
    | set(VIEWS)
    # cortex_m_nn::transpose's int16 case (our loop), for the transposes torch.export leaves
    | {aten.transpose.int, aten.permute.default, aten.t.default}
    | {aten.dropout.default, aten.constant_pad_nd.default, aten.pad.default}
)
INT16_OPS = INT16_OPS | SHARING_INT16


def has_int16_case(target: object) -> bool:
    """Whether some op of ``target`` can compute in int16."""
    return target in INT16_OPS


def int16_case(node: Node, weight: torch.Tensor | None) -> bool:
    """Whether this op (a node of the exported graph, ``weight`` its float weight constant
    when it has one) lowers onto an int16 case: a linear layer (per-channel weights then run
    as a 1x1 convolution, bounded by :func:`sums_fit`); a depthwise convolution (one input
    channel per group, ``arm_depthwise_conv_wrapper_s16``); or a convolution with one group
    (CMSIS-NN's ``arm_convolve_s16`` has none) whose weights keep within :func:`sums_fit`
    and avoid the DSP kernel's odd-channel defect (``ops.conv2d.dsp_tail_defect``)."""
    if node.target not in INT16_OPS:
        return False
    if node.target is aten.mean.dim:
        return _spatial_mean(node)
    if node.target is LSTM:  # an int16 initial state is not quantized yet: int8 then
        return node.args[1] is None
    if node.target in (aten.softmax.int, aten._softmax.default):
        value = node.meta.get("val")
        return isinstance(value, torch.Tensor) and value.dim() > 0 and value.shape[-1] >= 2
    if node.target not in CONVOLUTIONS:
        return True
    groups = node.args[6] if len(node.args) > 6 else node.kwargs.get("groups", 1)
    if weight is None:
        return False
    if groups != 1:
        return weight.shape[1] == 1  # depthwise: groups == input channels
    if not sums_fit(weight):
        return False
    output = node.meta.get("val")
    pixels = math.prod(output.shape[2:]) if isinstance(output, torch.Tensor) else 2
    columns = math.prod(weight.shape[1:])
    odd = weight.shape[0] % 2 == 1
    return not (columns > 512 and columns % 4 != 0 and odd and pixels >= 2)


def int4_case(node: Node, weight: torch.Tensor | None) -> bool:
    """Whether this weighted op (``weight`` its float weight constant) lowers onto an int4 case
    with int8 activations: a convolution with one group (``arm_convolve_wrapper_s4`` has none)
    or a depthwise one (``arm_depthwise_conv_wrapper_s4``), or a linear layer
    (``arm_fully_connected_s4``, or per channel a 1x1 s4 convolution), whose packed rows
    (``ops/int4.py``) hold whole bytes: KW * Cin even for a convolution, an even channel count
    for a depthwise one, even input features for a linear layer."""
    if weight is None or weight.dim() < 2:
        return False
    if node.target is aten.linear.default:
        return weight.shape[1] % 2 == 0
    if node.target not in CONVOLUTIONS:
        return False
    groups = node.args[6] if len(node.args) > 6 else node.kwargs.get("groups", 1)
    if groups == 1:  # rows of KW * Cin packed: [O, I, KH, KW] or conv1d's [O, I, K]
        return weight.shape[1] * weight.shape[-1] % 2 == 0
    return weight.shape[1] == 1 and groups % 2 == 0  # depthwise, an even input channel count


def _spatial_mean(node: Node) -> bool:
    """Whether a mean is a global average pool: over H, W of a 4-D input or L of a 3-D one."""
    source = node.args[0]
    value = source.meta.get("val") if isinstance(source, Node) else None
    if not isinstance(value, torch.Tensor):
        return False
    rank = value.dim()
    dims = sorted(int(d) % rank for d in node.args[1]) if rank else []
    return (rank, dims) in ((4, [2, 3]), (3, [2]))


def sums_fit(weight: torch.Tensor) -> bool:
    """Whether ``weight`` (float, output channels first), quantized per output channel to
    [-127, 127], keeps every channel's int16 dot product ``sum |q| * 2^15`` below 2^31: CMSIS-NN's
    s16 convolution adds partial sums in int32 (``ops.params.int16_sums_fit`` on the int8
    weights)."""
    rows = weight.detach().to(torch.float64).reshape(weight.shape[0], -1)
    peak = rows.abs().amax(dim=1, keepdim=True)
    scale = torch.where(peak > 0, peak / 127, torch.ones_like(peak))
    return bool(torch.all(torch.round(rows / scale).abs().sum(dim=1) * 32768 < 2**31))
