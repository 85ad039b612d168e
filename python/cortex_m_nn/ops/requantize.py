"""``cortex_m_nn::requantize``: an int8 or int16 tensor into another quantization and dtype,
where the precision changes between int8 and int16 regions of a model (``precision``).

CMSIS-NN has no such kernel; ours uses its s8 output stage, ``arm_nn_requantize``, per
element::

    y = clamp(requantize(x + input_offset, multiplier, shift) + output_offset, qmin, qmax)

with the kernels' rounding, ``qmin``/``qmax`` the range of ``dtype`` (the output's ExecuTorch
``ScalarType`` code: 1 int8, 2 int16). int16 values have zero point 0, so their offset is 0.
``arm_nn_requantize`` shifts left before multiplying, in int32: the shift must keep the
largest ``|x + input_offset|`` (255 for int8, 32768 for int16) below 2^31.
"""

from __future__ import annotations

from typing import Any

import torch

from cortex_m_nn.core.integers import RANGES, dtype_of_code
from cortex_m_nn.ops.arithmetic import Rounding
from cortex_m_nn.ops.arithmetic import requantize as requantize_int32
from cortex_m_nn.ops.library import define_operator

#: The largest |x + input_offset| of each input dtype (offsets: int8 [-127, 128], int16 0).
LARGEST = {torch.int8: 255, torch.int16: 32768}


def _fake(input: torch.Tensor, *arguments: Any) -> torch.Tensor:
    return torch.empty_like(input, dtype=dtype_of_code(arguments[-1]))


@define_operator(
    "requantize",
    "Tensor input, int input_offset, int output_offset, int multiplier, int shift, int dtype",
    _fake,
)
def requantize(
    input: torch.Tensor,
    input_offset: int,
    output_offset: int,
    multiplier: int,
    shift: int,
    dtype: int,
    *,
    rounding: Rounding,
) -> torch.Tensor:
    """Reference; ValueError for arguments the kernel refuses."""
    out_dtype = dtype_of_code(dtype)
    check(input.dtype, out_dtype, input_offset, output_offset, multiplier, shift)
    acc = input.to(torch.int64) + input_offset
    out = requantize_int32(acc, multiplier, shift, rounding) + output_offset
    return out.clamp(*RANGES[out_dtype]).to(out_dtype)


def check(
    source: torch.dtype,
    target: torch.dtype,
    input_offset: int,
    output_offset: int,
    multiplier: int,
    shift: int,
) -> None:
    """ValueError unless the arguments are ones the kernel computes exactly."""
    if source not in LARGEST:
        raise ValueError(f"requantize takes int8 or int16 input, not {source}")
    for dtype, offset, name in (
        (source, -input_offset, "input"),
        (target, output_offset, "output"),
    ):
        low, high = RANGES[dtype]
        if offset != 0 and (dtype is torch.int16 or not low <= offset <= high):
            raise ValueError(f"{name} zero point {offset} does not suit {dtype}")
    if not (0 <= multiplier < 2**31 and -31 <= shift <= 30):
        raise ValueError("multiplier must be in [0, 2^31) and shift in [-31, 30]")
    if LARGEST[source] << max(shift, 0) >= 2**31:
        raise ValueError(f"shift {shift} overflows int32 for {source} input")
