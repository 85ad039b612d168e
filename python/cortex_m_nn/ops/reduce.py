"""``cortex_m_nn::reduce``: int8 sum/mean, max or min over any dimensions (our own kernel).

CMSIS-NN has no general reduction (its mean is an average pool over H and W, which the
lowering still uses for that case). ``kind`` picks the reduction:

* ``SUM`` (0): an int32 accumulator per output element,
  ``acc = sum over the reduced positions of (x + input_offset)`` (``input_offset`` = -input
  zero point), then ``y = clamp(arm_nn_requantize(acc, output_multiplier, output_shift) +
  output_offset, -128, 127)``. A mean is this sum with ``1 / count`` folded into the
  multiplier (``input_scale / (count * output_scale)``); a sum's is ``input_scale /
  output_scale``. ``arm_nn_requantize`` is CMSIS-NN's (both roundings: ``ops.arithmetic``).
  At most 2^23 elements are summed per output, so the accumulator never overflows.
* ``MAX`` (1) / ``MIN`` (2): the largest / smallest int8 value; input and output share one
  quantization, so there is no arithmetic and the four integer arguments are 0.

Kernel contract (``op_reduce.cpp``): ``input`` int8 of rank 1 to 4 in its stored order,
``dims`` the stored dims reduced (sorted, distinct); ``out`` has the input's shape with each
reduced dim 1 (the caller views it to ``keepdim=False`` or the logical layout). Every output
element reads the reduced positions in row-major order; the order does not change an integer
sum, a max or a min.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import torch

from cortex_m_nn.ops.arithmetic import Rounding, quantize_multiplier
from cortex_m_nn.ops.library import define_operator
from cortex_m_nn.ops.params import Requantization, named

SUM, MAX, MIN = 0, 1, 2
#: Elements one output sums at most: 2^23 * 255 < 2^31.
MAX_COUNT = 1 << 23
MAX_RANK = 4


def _check(input: torch.Tensor, dims: Sequence[int], values: dict[str, Any]) -> list[int]:
    """The output shape; ValueError for arguments the kernel refuses."""
    rank = input.dim()
    if input.dtype != torch.int8 or not 1 <= rank <= MAX_RANK:
        raise ValueError(f"reduce input must be int8 of rank 1 to 4, got {input.dtype}{rank}-D")
    dims = list(dims)
    if not dims or dims != sorted(set(dims)) or not all(0 <= d < rank for d in dims):
        raise ValueError(f"reduce dims must be sorted distinct dims of the input, got {dims}")
    kind = values["kind"]
    integers = [values[k] for k in ("input_offset", "output_offset", "output_shift")]
    if kind == SUM:
        if math.prod(input.shape[d] for d in dims) > MAX_COUNT:
            raise ValueError(f"reduce sums at most {MAX_COUNT} elements per output")
        if not -127 <= values["input_offset"] <= 128 or not -128 <= values["output_offset"] < 128:
            raise ValueError("reduce offsets out of the int8 range")
        if not -31 <= values["output_shift"] <= 30 or not 0 <= values["output_multiplier"] < 2**31:
            raise ValueError("reduce requantization out of range")
    elif kind in (MAX, MIN):
        if any(integers) or values["output_multiplier"]:
            raise ValueError("reduce max/min takes no requantization: its integers must be 0")
    else:
        raise ValueError(f"reduce kind must be 0 (sum), 1 (max) or 2 (min), got {kind}")
    return [1 if d in dims else size for d, size in enumerate(input.shape)]


def _fake(input: torch.Tensor, dims: Sequence[int], *arguments: Any) -> torch.Tensor:
    shape = _check(input, dims, named("reduce", arguments, skip=2))
    return input.new_empty(shape, dtype=torch.int8)


@define_operator(
    "reduce",
    "Tensor input, int[] dims, int kind, int input_offset, int output_offset,"
    " int output_multiplier, int output_shift",
    _fake,
)
def reduce(
    input: torch.Tensor, dims: Sequence[int], *arguments: Any, rounding: Rounding
) -> torch.Tensor:
    """Reference: the sum (requantized), max or min over ``dims``, keeping them as size 1."""
    values = named("reduce", arguments, skip=2)
    _check(input, dims, values)
    dims = list(dims)
    if values["kind"] == MAX:
        return input.amax(dims, keepdim=True)
    if values["kind"] == MIN:
        return input.amin(dims, keepdim=True)
    acc = (input.to(torch.int64) + values["input_offset"]).sum(dims, keepdim=True)
    return Requantization.of({**values, "activation_min": -128, "activation_max": 127}).apply(
        acc, rounding
    )


def sum_parameters(input_scale: float, output_scale: float, count: int = 1) -> tuple[int, int]:
    """(output_multiplier, output_shift) of a sum (``count`` = 1) or a mean of ``count``."""
    return quantize_multiplier(input_scale / (count * output_scale))
