"""``cortex_m_nn::add``: int8 elementwise addition of two same-shape tensors.

Reference for ``arm_elementwise_add_s8``. Per element::

    a = requantize((x1 + input1_offset) << left_shift, input1_multiplier, input1_shift)
    b = requantize((x2 + input2_offset) << left_shift, input2_multiplier, input2_shift)
    y = clamp(requantize(a + b, output_multiplier, output_shift) + output_offset, min, max)

Shift convention (all three shifts): the one of ``arm_nn_requantize``, positive = left
shift, negative = right shift. TFLite Micro passes its ``QuantizeMultiplierSmallerThanOneExp``
exponents unchanged, so the input and output shifts are normally <= 0; ``left_shift`` is a
plain (non-negative) left shift applied before requantization, 20 for int8.
Offsets: ``inputN_offset = -inputN_zero_point``, ``output_offset = output_zero_point``.
The DSP build masks each ``x + offset`` to 16 bits before shifting, which agrees with this
only for ``left_shift >= 16``; :func:`add_parameters` always gives 20.
"""

from __future__ import annotations

import torch

from cortex_m_nn.ops.arithmetic import active_rounding, quantize_multiplier, requantize, wrap_int32
from cortex_m_nn.ops.library import define_operator

#: TFLite Micro's ``left_shift`` for int8 add (headroom for the rescaled inputs).
LEFT_SHIFT_INT8 = 20


def add_parameters(
    input1_scale: float,
    input2_scale: float,
    output_scale: float,
    *,
    input1_zero_point: int = 0,
    input2_zero_point: int = 0,
    output_zero_point: int = 0,
) -> dict[str, int]:
    """The integer arguments of :func:`add` (all but the activation range), TFLite Micro style.

    Both inputs are rescaled to twice the larger input scale, shifted left by 20 bits, and
    the sum rescaled to the output scale. Keys are the operator's argument names.
    """
    twice_max_input_scale = 2.0 * max(input1_scale, input2_scale)
    input1_multiplier, input1_shift = quantize_multiplier(input1_scale / twice_max_input_scale)
    input2_multiplier, input2_shift = quantize_multiplier(input2_scale / twice_max_input_scale)
    output_multiplier, output_shift = quantize_multiplier(
        twice_max_input_scale / ((1 << LEFT_SHIFT_INT8) * output_scale)
    )
    return {
        "input1_offset": -input1_zero_point,
        "input1_multiplier": input1_multiplier,
        "input1_shift": input1_shift,
        "input2_offset": -input2_zero_point,
        "input2_multiplier": input2_multiplier,
        "input2_shift": input2_shift,
        "left_shift": LEFT_SHIFT_INT8,
        "output_offset": output_zero_point,
        "output_multiplier": output_multiplier,
        "output_shift": output_shift,
    }


def _fake(input1: torch.Tensor, input2: torch.Tensor, *args: int) -> torch.Tensor:
    if input1.shape != input2.shape:
        raise ValueError(f"add needs same-shape inputs, got {input1.shape} and {input2.shape}")
    return torch.empty_like(input1, dtype=torch.int8)


@define_operator(
    "add",
    "Tensor input1, Tensor input2, int input1_offset, int input1_multiplier, int input1_shift,"
    " int input2_offset, int input2_multiplier, int input2_shift, int left_shift,"
    " int output_offset, int output_multiplier, int output_shift, int activation_min,"
    " int activation_max",
    _fake,
)
def add(
    input1: torch.Tensor,
    input2: torch.Tensor,
    input1_offset: int,
    input1_multiplier: int,
    input1_shift: int,
    input2_offset: int,
    input2_multiplier: int,
    input2_shift: int,
    left_shift: int,
    output_offset: int,
    output_multiplier: int,
    output_shift: int,
    activation_min: int,
    activation_max: int,
) -> torch.Tensor:
    """Reference ``arm_elementwise_add_s8`` (see the module docstring for the conventions)."""
    if input1.shape != input2.shape:
        raise ValueError(f"add needs same-shape inputs, got {input1.shape} and {input2.shape}")
    rounding = active_rounding()
    a = wrap_int32((input1.to(torch.int64) + input1_offset) << left_shift)
    b = wrap_int32((input2.to(torch.int64) + input2_offset) << left_shift)
    a = requantize(a, input1_multiplier, input1_shift, rounding)
    b = requantize(b, input2_multiplier, input2_shift, rounding)
    total = requantize(wrap_int32(a + b), output_multiplier, output_shift, rounding)
    return (total + output_offset).clamp(activation_min, activation_max).to(torch.int8)
