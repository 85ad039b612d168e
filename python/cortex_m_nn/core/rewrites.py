"""The nearest supported rewrite for an operator cortex_m_nn cannot lower.

A compile that meets such an operator fails naming it, its source line and the advice found
here (``--allow-fallback`` keeps it in fp32 instead). Advice is looked up by the ATen op
(``layer_norm`` for ``aten.layer_norm.default``) and the kind of refusal
(:class:`~cortex_m_nn.core.refusals.Refusal`): first an entry matching both, then one
matching the kind alone (the kind is about the graph, e.g. an input that stayed float), then
one for the op alone. Every rewrite named is one the operator table of ``docs/operators.md``
lowers, or the advice says plainly that nothing does yet.
"""

from __future__ import annotations

from dataclasses import dataclass

from cortex_m_nn.core.graph import base_name
from cortex_m_nn.core.refusals import Refusal as R

#: The tables of ``cortex_m_nn::lut``, for advice on element-wise functions.
TABLES = (
    "sigmoid, tanh, hardswish, hardsigmoid, gelu, silu, leaky_relu, elu, mish, softplus, celu, "
    "selu, log_sigmoid, abs, neg, square, sqrt, rsqrt, exp, log, reciprocal, erf, prelu"
)
SLICES = "split", "chunk", "slice", "narrow", "select", "unbind", "index", "index_select"


@dataclass(frozen=True)
class Rewrite:
    """Advice for ``ops`` (ATen base names; empty: any op) refused for one of ``kinds``."""

    ops: tuple[str, ...]
    advice: str
    #: the refusals the advice is for (empty: any)
    kinds: tuple[R, ...] = ()

    def matches(self, op: str, kind: R | None) -> bool:
        return (not self.ops or op in self.ops) and (not self.kinds or kind in self.kinds)


REWRITES: tuple[Rewrite, ...] = (
    # -- an op refused for a particular kind -----------------------------------------------
    Rewrite(
        ("conv2d",),
        "give the padding as numbers, or 'same' or 'valid': padding=(k - 1) // 2 is 'same' "
        "for an odd kernel k at stride 1",
        kinds=(R.STRING_PADDING,),
    ),
    Rewrite(
        ("conv_transpose2d", "conv_transpose1d"),
        "CMSIS-NN's transposed convolution has groups=1 and dilation=1 only: use groups=1 "
        "with a block-diagonal weight (zero across groups: the same result at groups x the "
        "MACs), dilation=1 with a (k - 1) * d + 1 kernel, zero between the taps",
        kinds=(R.GROUPED_TRANSPOSED_CONV, R.DILATED_TRANSPOSED_CONV),
    ),
    Rewrite(
        ("conv_transpose2d", "conv_transpose1d"),
        "change kernel, stride, padding or output_padding so that CMSIS-NN computes it "
        "exactly (the reason says which bound fails)",
        kinds=(R.TRANSPOSED_CONV_NOT_EXACT,),
    ),
    Rewrite(
        ("max_pool2d",),
        "arm_max_pool_s8 has no dilation: use dilation=1 (a kernel of (k - 1) * d + 1 "
        "spans the same window)",
        kinds=(R.POOL_DILATION,),
    ),
    Rewrite(("avg_pool2d",), "pass count_include_pad=False", kinds=(R.COUNT_INCLUDE_PAD,)),
    Rewrite(
        ("avg_pool2d",),
        "drop divisor_override and scale the result with a multiplication (cortex_m_nn::mul)",
        kinds=(R.DIVISOR_OVERRIDE,),
    ),
    Rewrite(
        ("adaptive_avg_pool2d",),
        "make the input size a multiple of the output size (uniform windows), or use "
        "avg_pool2d with an explicit kernel and stride",
        kinds=(R.ADAPTIVE_NOT_UNIFORM,),
    ),
    Rewrite(
        ("softmax", "_softmax"),
        "softmax runs over the innermost stored dim, the last one (channels, dim 1, of a "
        "4-D tensor): move the dim there, x.transpose(dim, -1).softmax(-1).transpose(dim, -1) "
        "(4-D: x.transpose(dim, 1).softmax(1).transpose(dim, 1)); transposes are lowered",
        kinds=(R.SOFTMAX_DIM,),
    ),
    Rewrite(
        ("softmax", "_softmax"),
        "arm_softmax_s8 is exact for rows of at most 511 entries: shorten the rows (e.g. "
        "softmax over fewer classes or positions)",
        kinds=(R.SOFTMAX_ROW_LENGTH,),
    ),
    Rewrite(
        ("pad", "constant_pad_nd"),
        "only constant padding has a kernel: use F.pad(x, pads, mode='constant')",
        kinds=(R.PAD_MODE,),
    ),
    Rewrite(
        ("pad", "constant_pad_nd"),
        "negative padding crops: slice the tensor instead (x[..., a:b] is one strided copy)",
        kinds=(R.NEGATIVE_PADDING,),
    ),
    Rewrite(
        ("add", "sub"),
        "scale the operand instead of passing alpha: a - b * alpha (cortex_m_nn::mul, then sub)",
        kinds=(R.ALPHA,),
    ),
    Rewrite(
        ("minimum", "maximum"),
        "arm_minimum_s8/arm_maximum_s8 cannot requantize: compare tensors from one "
        "quantization (e.g. a tensor and a clamp of it), or use clamp with constant bounds",
        kinds=(R.QUANTIZED_DIFFERENTLY,),
    ),
    Rewrite(
        ("concat", "cat"),
        "concatenate tensors that feed only this cat (the quantizer then gives them the "
        "output's quantization)",
        kinds=(R.CONCAT_REQUANTIZING,),
    ),
    Rewrite(
        ("linear",),
        "make the features the last dim of a 2-D or 3-D tensor (flatten or permute first), "
        "or mix channels with a 1x1 conv2d",
        kinds=(R.LINEAR_OVER_WIDTH,),
    ),
    Rewrite(
        ("matmul", "bmm", "mm"),
        "reshape both operands to 2-D to 4-D with broadcastable batch dims",
        kinds=(R.OPERAND_RANK, R.MATMUL_BATCH_BROADCAST),
    ),
    Rewrite(("dropout",), "call model.eval() before compiling", kinds=(R.DROPOUT_TRAINING,)),
    # -- any op, by kind --------------------------------------------------------------------
    Rewrite(
        (),
        "the table takes constant arguments: pass the bound or slope as a number",
        kinds=(R.TENSOR_ARGUMENTS,),
    ),
    Rewrite(
        (),
        "its input stays float (an earlier op that fell back, or a float input the "
        "quantizer left alone): fix that op first",
        kinds=(R.INPUT_NOT_QUANTIZED,),
    ),
    Rewrite(
        (),
        "weights must be constants (parameters or buffers), not tensors computed at run time",
        kinds=(R.WEIGHT_NOT_CONSTANT,),
    ),
    Rewrite(
        (),
        "quantize with cortex_m_nn's own quantizer (CortexMQuantizer: int8, symmetric "
        "per-channel weights)",
        kinds=(R.NOT_INT8, R.WEIGHT_CHANNEL_AXIS, R.WEIGHT_NOT_SYMMETRIC),
    ),
    Rewrite(
        (),
        "the relu/clamp cannot fuse into this op: apply it before, or after an op it fuses "
        "into (conv2d, linear, add, mul, pools)",
        kinds=(R.ACTIVATION_AFTER,),
    ),
    Rewrite(
        ("layer_norm", "group_norm"),
        "normalize smaller groups (at most 65536 elements each): more groups, or a layer norm "
        "over fewer dims",
        kinds=(R.NORM_GROUP_SIZE,),
    ),
    Rewrite(
        ("group_norm",),
        "reshape the input to [N, C, H, W] (merge the trailing dims) around the group norm",
        kinds=(R.NORM_INPUT_RANK,),
    ),
    Rewrite(
        ("layer_norm", "group_norm"),
        "the weight is too large for the output scale: keep the weights near 1 or let the "
        "output be observed on representative data",
        kinds=(R.NORM_SCALE,),
    ),
    # -- an op, whatever the reason ---------------------------------------------------------
    Rewrite(
        ("layer_norm", "group_norm"),
        "cortex_m_nn::layer_norm normalizes int8 activations: quantize its input (an earlier "
        "op that stays float keeps it float), or use BatchNorm right after a conv2d or linear",
    ),
    Rewrite(
        ("native_layer_norm", "native_group_norm", "instance_norm"),
        "use nn.LayerNorm or nn.GroupNorm (InstanceNorm2d is GroupNorm(C, C)), which lower to "
        "cortex_m_nn::layer_norm, or BatchNorm right after a conv2d or linear",
    ),
    Rewrite(
        ("rms_norm",),
        "CMSIS-NN has no int8 normalization: use BatchNorm right after a conv2d or linear "
        "(folded into its weights)",
    ),
    Rewrite(
        ("batch_norm", "_native_batch_norm_legit_no_training", "native_batch_norm"),
        "use eval mode with constant running statistics on a 2-D to 4-D tensor (lowered as a "
        "depthwise 1x1 conv), or put it right after a conv2d or linear, which absorbs it",
    ),
    Rewrite(
        ("conv1d",),
        "use conv2d with a 1 x k kernel on x.unsqueeze(2) ([N, C, 1, L]), then squeeze(2)",
    ),
    Rewrite(
        ("conv3d",),
        "no 3-D kernel: fold the depth into the batch or the channels and use conv2d",
    ),
    Rewrite(
        ("conv_transpose3d",),
        "no 3-D kernel: fold the depth into the batch or the channels and use conv_transpose2d",
    ),
    Rewrite(
        ("lstm",),
        "CMSIS-NN's LSTM runs one direction without projection and gives the hidden states: "
        "for bidirectional=True use two nn.LSTM, the second on x.flip(time dim) with its "
        "output flipped back, and concatenate; for proj_size > 0 use proj_size=0 and an "
        "nn.Linear on the output; read h_n or the output, not c_n (to keep the state from "
        "call to call, wrap the LSTM in cortex_m_nn.nn.Streaming); export in eval mode",
    ),
    Rewrite(
        ("gru",),
        "our GRU runs one direction in eval mode: for bidirectional=True use two nn.GRU, the "
        "second on x.flip(time dim) with its output flipped back, and concatenate; export in "
        "eval mode",
    ),
    Rewrite(
        ("gru",),
        "give the initial state as a model input (or zeros) that only the GRU reads, so that "
        "it is quantized as the output; the GRU runs int8 activations",
        kinds=(R.GRU_RANGE,),
    ),
    Rewrite(
        ("rnn_tanh", "rnn_relu"),
        "CMSIS-NN has no plain RNN kernel and nothing it runs computes one exactly: nn.GRU "
        "and nn.LSTM are the nearest recurrent layers it runs (retrain), a temporal "
        "convolution (conv2d with a 1 x k kernel over [N, C, 1, T]) the nearest other one",
    ),
    Rewrite(
        ("lstm",),
        "give the initial state as model inputs (or zeros) that only the LSTM reads, so "
        "that the hidden state is quantized as the output and the cell state in int16 at "
        "the cell scale",
        kinds=(R.LSTM_STATE,),
    ),
    Rewrite(
        ("div",),
        "divide by a Python number (a table, or no op at all); a tensor divisor has no int8 "
        "kernel: for a constant tensor c multiply by 1 / c (cortex_m_nn::mul)",
    ),
    Rewrite(("neg",), "lowered as a table when its input is an int8 activation"),
    Rewrite(("pow", "square"), "a constant exponent is a table: pass it as a number"),
    Rewrite(
        ("sum", "amax", "amin"),
        "reduce at most 4 stored dims after merging neighbours, without a dtype argument",
    ),
    Rewrite(
        ("prelu",),
        "the slopes must be the module's parameters (constants), and a per-channel PReLU's "
        "input 2-D to 4-D",
    ),
    Rewrite(
        ("log_softmax",),
        "use softmax (int8, arm_softmax_s8) and take the log after the model's output",
    ),
    Rewrite(
        ("exp", "log", "sqrt", "rsqrt", "reciprocal", "erf", "abs", "softplus"),
        "a table computes it when the function is defined over the whole int8 range of its "
        "input: e.g. sqrt(relu(x)) or rsqrt(x * x + eps) rather than sqrt of a signed tensor",
    ),
    Rewrite(
        ("sin", "cos", "logit"),
        f"no table for it yet: the int8 element-wise tables are {TABLES} and "
        "relu/relu6/hardtanh/clamp: rewrite with those",
    ),
    Rewrite(
        ("leaky_relu", "elu"),
        "lowered as a 256-entry table when its input is an int8 activation and its "
        "arguments (negative_slope, alpha) are constants",
    ),
    Rewrite(
        ("upsample_bicubic2d", "_upsample_bilinear2d_aa", "_upsample_bicubic2d_aa"),
        "cortex_m_nn::resize computes nearest, nearest-exact and bilinear: use "
        "F.interpolate(x, mode='bilinear') without antialias",
    ),
    Rewrite(
        ("upsample_nearest2d", "_upsample_nearest_exact2d", "upsample_bilinear2d"),
        "lowered as cortex_m_nn::resize when its input is a 4-D int8 activation of the same "
        "quantization and no side exceeds 32767",
    ),
    Rewrite(
        SLICES,
        "slices with constant bounds and a positive step (slice, narrow, select, split, "
        "chunk, unbind) are lowered; gather with index tensors is not: use those instead",
    ),
    Rewrite(
        ("embedding",),
        "no int8 gather kernel: look the embeddings up before the model and feed them as its input",
    ),
    Rewrite(
        (),
        "compute into a new tensor: y = x + 1 instead of x += 1, y = torch.relu(x) instead "
        "of x.relu_(), inplace=False on the layer",
        kinds=(R.MUTATED_INPUT, R.MUTATED_VIEW, R.IN_PLACE_ONLY),
    ),
    Rewrite(
        (),
        "keep state out of forward(): read the buffer and compute a new tensor "
        "(y = self.buffer + x instead of self.buffer += x); update it outside the model",
        kinds=(R.MUTATED_BUFFER,),
    ),
    Rewrite(
        (),
        "call the SVDF layer on one frame [batch_size, input_size] per forward, with the "
        "batch size it was built with",
        kinds=(R.SVDF_SHAPE,),
    ),
    Rewrite(
        (),
        "shorten the SVDF's memory_size or use state_bits=8: its int32 time-filter sums "
        "must not wrap",
        kinds=(R.SVDF_ACCUMULATOR,),
    ),
)

#: Refusals with no advice of their own: the op's entry (or :data:`GENERIC`) answers them.
#: They are about shapes, layouts or numbers of one model rather than a habit to rewrite.
GENERIC_KINDS = frozenset(
    {
        R.NOT_QUANTIZED,
        R.NOT_A_CONSTANT,
        R.INPUT_QPARAMS_DISAGREE,
        R.QPARAMS_CHANGE,
        R.OPERAND_NOT_FINITE,
        R.OPERAND_TYPE,
        R.BROADCAST_LAYOUT,
        R.BROADCAST_RANK,
        R.CONSTANT_OPERANDS,
        R.MUL_REQUANTIZATION,
        R.ELEMENTWISE_SHAPE,
        R.CONV_INPUT_RANK,
        R.CONV_OUTPUT_SHAPE,
        R.POOL_ARGUMENT,
        R.POOL_INPUT_RANK,
        R.POOL_OUTPUT_SHAPE,
        R.IMAGE_RANK,
        R.NOT_A_VIEW,
        R.NOT_A_PERMUTATION,
        R.TRANSPOSE_DIMS,
        R.NOT_STRIDED,
        R.PAD_VALUE,
        R.PAD_RANK,
        R.PAD_DIMS,
        R.CONCAT_RANKS,
        R.LINEAR_SCRATCH,
        R.INT16_REQUANTIZATION,
        R.INT16_TABLE_ERROR,
        R.LSTM_RANGE,
        R.MATMUL_INNER_DIMENSION,
        R.MATMUL_RESULT_SHAPE,
        R.SOFTMAX_OUTPUT_QPARAMS,
        R.RESIZE_SIZE,
        R.NORM_SHAPE,
        R.UNDEFINED_VALUES,
        R.REDUCTION,
        R.SVDF_REQUANTIZATION,
    }
)

#: Advice for an op no entry covers.
GENERIC = (
    "no cortex_m_nn lowering for it: express it with the operators of docs/operators.md "
    "('Operators lowered today')"
)


def rewrite_for(op: str, kind: R | None) -> str:
    """The nearest supported rewrite for ``op`` (``aten.layer_norm``) refused as ``kind``."""
    name = base_name(op)
    for entry in REWRITES:
        if entry.ops and entry.kinds and entry.matches(name, kind):
            return entry.advice
    for entry in REWRITES:
        if not entry.ops and entry.matches(name, kind):
            return entry.advice
    for entry in REWRITES:
        if not entry.kinds and entry.matches(name, kind):
            return entry.advice
    return GENERIC
