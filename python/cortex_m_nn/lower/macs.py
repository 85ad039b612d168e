"""Multiply-accumulates of an operator left in fp32, from its tensor shapes.

The report counts MACs the way the lowering rules do for their kernels: the products of
convolutions, linear layers and matrix products. Element-wise ops, pools and data movement
count 0, as their lowered forms do. Normalizations are counted per element: 1 MAC for the
variance's sum of squares and 1 for applying the per-row scale, 1 more with an affine weight
(batch norm at inference has fixed statistics: 1 MAC, a scale and shift). Recurrent layers
multiply every 2-D weight matrix with one vector per time step and batch item.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from cortex_m_nn.core.graph import base_name

Shape = tuple[int, ...]

CONVOLUTIONS = {"conv1d", "conv2d", "conv3d", "convolution", "_convolution"}
TRANSPOSED = {"conv_transpose1d", "conv_transpose2d", "conv_transpose3d"}
MATMULS = {"matmul", "mm", "bmm", "linear"}
#: Matrix products with an added first operand: ``addmm(bias, a, b)``.
ADDED_MATMULS = {"addmm", "baddbmm"}
#: Normalizations that compute their input's statistics → the argument index of their weight.
NORMALIZATIONS = {
    "layer_norm": 2,
    "native_layer_norm": 2,
    "group_norm": 2,
    "native_group_norm": 1,
    "instance_norm": 1,
    "rms_norm": 2,
}
BATCH_NORMS = {"batch_norm", "_native_batch_norm_legit_no_training", "native_batch_norm"}
RECURRENT = {"lstm", "gru", "rnn_tanh", "rnn_relu"}


#: An SVDF step's two float operators (``cortex_m_nn.nn``).
SVDF = {"svdf_memory", "svdf_time"}


def svdf_macs(batch: int, inputs: int, filters: int, memory: int) -> int:
    """One SVDF step: the feature projection (``filters × inputs``) and the time filter
    (``filters × memory``), per batch item."""
    return batch * filters * (inputs + memory)


def fp32_macs(
    op: str,
    args: Sequence[Shape | None],
    output: Shape | None,
    weights: Sequence[Shape] = (),
    transposed: bool = False,
) -> int:
    """MACs of ``op`` (an ATen name) from the shapes of its positional arguments.

    ``args[i]`` is the shape of argument ``i`` when it is a tensor, else None. ``weights``
    are the shapes of a recurrent layer's parameter list; ``transposed`` is
    ``aten.convolution``'s flag. Other ops, and missing shapes, count 0.
    """
    name = base_name(op)

    def arg(index: int) -> Shape | None:
        return args[index] if index < len(args) else None

    if name in CONVOLUTIONS and not transposed:
        weight = arg(1)  # [out, in / groups, *kernel]: each output sums in/groups × kernel
        return math.prod(output) * math.prod(weight[1:]) if output and weight else 0
    if name in TRANSPOSED or name in CONVOLUTIONS:
        x, weight = arg(0), arg(1)  # weight [in, out / groups, *kernel]
        return math.prod(x) * math.prod(weight[1:]) if x and weight else 0
    if name in MATMULS or name in ADDED_MATMULS:
        first = arg(1) if name in ADDED_MATMULS else arg(0)
        return math.prod(output) * first[-1] if output and first else 0
    if name in NORMALIZATIONS:
        x = arg(0)
        affine = arg(NORMALIZATIONS[name]) is not None
        return math.prod(x) * (3 if affine else 2) if x else 0
    if name in BATCH_NORMS:
        x = arg(0)
        return math.prod(x) if x else 0
    if name in SVDF:  # memory: x [B, I] → state [B, F, M]; time: state [B, F, M]
        x, state = arg(0), output if name == "svdf_memory" else arg(0)
        if not x or not state or len(state) != 3:
            return 0
        inputs = x[-1] if name == "svdf_memory" else 0
        memory = state[2] if name == "svdf_time" else 0
        return svdf_macs(state[0], inputs, state[1], memory)
    if name in RECURRENT:
        x = arg(0)
        if not x:
            return 0
        vectors = math.prod(x) // x[-1]  # batch items × time steps
        return vectors * sum(math.prod(w) for w in weights if len(w) == 2)
    return 0
