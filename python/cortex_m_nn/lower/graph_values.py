"""What the lowering knows about a value: an int8 or int16 tensor, its quantization and layout."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch.fx import Node

from cortex_m_nn.core.families import DEQUANTIZE, QUANTIZE
from cortex_m_nn.core.integers import RANGES
from cortex_m_nn.core.refusals import LoweringRefused, Refusal

NCHW_TO_NHWC = [0, 2, 3, 1]
NHWC_TO_NCHW = [0, 3, 1, 2]
#: Ranks of the activations stored channels-last: NHWC for 4-D, NLC for 3-D ([N, C, L]).
CHANNELS_LAST_RANKS = (3, 4)


@dataclass(frozen=True)
class QValue:
    """An int8 (or int16: ``dtype``, zero point 0) tensor in the lowered graph.

    ``shape`` is the logical (PyTorch, NCHW) shape; ``nhwc`` says the stored tensor is the
    logical tensor with channels (dim 1) last, i.e. its actual shape is ``shape`` permuted by
    :func:`channels_last_order`: NHWC for a 4-D value, NLC for a 3-D one (a 1-D convolution's
    ``[N, C, L]``).
    """

    node: Node
    scale: float
    zero_point: int
    shape: tuple[int, ...]
    nhwc: bool = False
    dtype: torch.dtype = torch.int8

    @property
    def stored_shape(self) -> tuple[int, ...]:
        if self.nhwc:
            return tuple(self.shape[d] for d in channels_last_order(len(self.shape)))
        return self.shape

    @property
    def layout_free(self) -> bool:
        """Stored bytes are in logical order whatever the layout (C == 1 or H·W == 1)."""
        return not self.nhwc or self.shape[1] == 1 or math.prod(self.shape[2:]) == 1


def channels_last_order(rank: int) -> list[int]:
    """The permutation storing a ``rank``-D tensor channels-last: ``[0, 2, …, rank - 1, 1]``."""
    if rank not in CHANNELS_LAST_RANKS:
        raise ValueError(f"only 3-D and 4-D values are stored channels-last, not {rank}-D")
    return [0, *range(2, rank), 1]


def qparams_of(node: Node) -> tuple[float, int]:
    """Scale and zero point of a per-tensor quantize/dequantize node (int8, or int16 with
    zero point 0: :func:`dtype_of`)."""
    dtype_of(node)
    _, scale, zero_point = node.args[:3]
    return float(scale), int(zero_point)


def dtype_of(node: Node) -> torch.dtype:
    """The activation dtype of a per-tensor quantize/dequantize node: int8 over its full
    range, or int16 over its full range with zero point 0 (what CMSIS-NN's s16 kernels take);
    anything else is refused."""
    _, _, zero_point, qmin, qmax, dtype = node.args[:6]
    if RANGES.get(dtype) != (qmin, qmax) or (dtype is torch.int16 and zero_point != 0):
        raise LoweringRefused(
            Refusal.NOT_INT8,
            f"activation quantized as {dtype}[{qmin}, {qmax}] with zero point {zero_point}, "
            "not int8 or symmetric int16",
        )
    return dtype


def logical_shape(node: Node) -> tuple[int, ...]:
    """The node's tensor shape; quantize/dequantize nodes convert_pt2e inserts carry no
    metadata (e.g. a requantization between two shared quantizations) and take their input's."""
    value = node.meta.get("val")
    if value is None:
        value = node.meta.get("tensor_meta")
    if value is None and node.target in QUANTIZE | DEQUANTIZE:
        return logical_shape(node.args[0])  # q/dq nodes inserted by convert_pt2e: no meta
    if value is None:
        raise KeyError(f"no shape recorded for {node.name}")
    return tuple(int(d) for d in value.shape)


def quantize_value(
    value: float, scale: float, zero_point: int, dtype: torch.dtype = torch.int8
) -> int:
    """Quantize one float the way PT2E does (round half to even in float32), clamped to
    ``dtype``'s range."""
    low, high = RANGES[dtype]
    inverse = torch.tensor(1.0 / scale, dtype=torch.float32)
    q = torch.round(torch.tensor(value, dtype=torch.float32) * inverse).item() + zero_point
    return int(min(max(q, low), high))
