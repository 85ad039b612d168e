"""The integer ranges values take, and the quantizations CMSIS-NN fixes: every stage's one
source for them."""

from __future__ import annotations

import torch

INT8_MIN, INT8_MAX = -128, 127
#: int16 activations' range (symmetric quantization, zero point 0).
INT16_MIN, INT16_MAX = -32768, 32767
INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
#: The int4 weights' range: symmetric, as int8 weights are [-127, 127].
INT4_MIN, INT4_MAX = -7, 7

#: Integer range of each activation dtype.
RANGES: dict[torch.dtype, tuple[int, int]] = {
    torch.int8: (INT8_MIN, INT8_MAX),
    torch.int16: (INT16_MIN, INT16_MAX),
}

#: CMSIS-NN's arm_softmax_s8 writes probabilities with this fixed scale and zero point.
SOFTMAX_OUTPUT_SCALE = 1.0 / 256.0
SOFTMAX_OUTPUT_ZERO_POINT = -128


def scalar_type(dtype: torch.dtype) -> int:
    """ExecuTorch's ``ScalarType`` code of an activation dtype (the ``dtype`` arguments of
    ``cortex_m_nn::quantize`` and ``requantize``): Char = 1, Short = 2."""
    codes = {torch.int8: 1, torch.int16: 2}
    if dtype not in codes:
        raise ValueError(f"activations are int8 or int16, not {dtype}")
    return codes[dtype]


def dtype_of_code(code: int) -> torch.dtype:
    """The activation dtype of a ``ScalarType`` code (ValueError for another code)."""
    dtypes = {1: torch.int8, 2: torch.int16}
    if code not in dtypes:
        raise ValueError(f"activation dtype code must be 1 (int8) or 2 (int16), got {code}")
    return dtypes[code]
