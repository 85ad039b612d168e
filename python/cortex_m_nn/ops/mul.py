"""``cortex_m_nn::mul``: int8 element-wise multiplication of two tensors.

Reference for ``arm_elementwise_mul_s8``. Per element::

    y = clamp(requantize((x1 + input1_offset) * (x2 + input2_offset),
                         output_multiplier, output_shift) + output_offset, min, max)

``inputN_offset = -inputN_zero_point`` (-127..128), ``output_offset = output_zero_point``;
``output_multiplier, output_shift`` encode ``input1_scale * input2_scale / output_scale``
(TFLite Micro's ``QuantizeMultiplier``; the shift may be positive, a left shift). The
product's magnitude is at most 2^16, so every build (scalar, DSP ``SMULBB``, MVE) computes
the same value.
With single rounding the MVE build shifts the product left by ``output_shift + 1`` in 32
bits, so :func:`mul_parameters` refuses shifts above :data:`MAX_OUTPUT_SHIFT`.

int16 is the other case (``arm_elementwise_mul_s16``): zero points 0 (its offsets are
ignored), products up to 2^30; :func:`mul_parameters` keeps the largest product shifted left
by ``output_shift + 1`` (MVE's single-rounding build) inside int32.

Arguments map one to one onto ``arm_elementwise_mul_s8(input_1_vect, input_2_vect,
input1_offset, input2_offset, output, output_offset, output_multiplier, output_shift,
activation_min, activation_max, block_size)``. The inputs broadcast as
:mod:`cortex_m_nn.ops.broadcast` describes (one call per output row).
"""

from __future__ import annotations

import torch

from cortex_m_nn.ops.arithmetic import Rounding, quantize_multiplier
from cortex_m_nn.ops.broadcast import fake_output
from cortex_m_nn.ops.library import define_operator
from cortex_m_nn.ops.params import ElementwiseParams, ElementwiseScales, named

#: |product| <= 2^16; shifted left by this (+1 for MVE single rounding) it stays in int32.
MAX_OUTPUT_SHIFT = 13


def mul_parameters(
    *scales: float, largest_product: int | None = None, **zero_points: int
) -> dict[str, int]:
    """The integer arguments of :func:`mul` (all but the activation range), TFLite Micro style;
    arguments as for :func:`cortex_m_nn.ops.add.add_parameters`. ``largest_product`` (the int16
    case: the largest |x1 * x2| the operands allow) bounds the shift. ValueError for a
    requantization the kernel cannot take."""
    q = ElementwiseScales(*scales, **zero_points)
    input1_offset, input2_offset, output_offset = q.offsets()
    output_multiplier, output_shift = quantize_multiplier(
        q.input1_scale * q.input2_scale / q.output_scale
    )
    if largest_product is not None and largest_product << max(output_shift + 1, 0) >= 2**31:
        raise ValueError(
            f"int16 mul's output shift {output_shift} would take its products out of int32"
        )
    if output_shift > MAX_OUTPUT_SHIFT:
        raise ValueError(
            f"mul output scale {q.output_scale} is over 2^{MAX_OUTPUT_SHIFT} times finer than "
            "the product of the input scales; calibrate the output range"
        )
    return {
        "input1_offset": input1_offset,
        "input2_offset": input2_offset,
        "output_offset": output_offset,
        "output_multiplier": output_multiplier,
        "output_shift": output_shift,
    }


def _fake(input1: torch.Tensor, input2: torch.Tensor, *args: int) -> torch.Tensor:
    return fake_output("mul", input1, input2)


@define_operator(
    "mul",
    "Tensor input1, Tensor input2, int input1_offset, int input2_offset, int output_offset,"
    " int output_multiplier, int output_shift, int activation_min, int activation_max",
    _fake,
)
def mul(
    input1: torch.Tensor, input2: torch.Tensor, *arguments: int, rounding: Rounding
) -> torch.Tensor:
    """Reference ``arm_elementwise_mul_s8`` (see the module docstring for the conventions);
    ``arguments`` as the schema lists them after the inputs."""
    params = ElementwiseParams.of(named("mul", arguments, skip=2))
    params.check_dtype("mul", input1, input2)
    a, b = params.operands("mul", input1, input2)
    return params.output.apply(a * b, rounding, input1.dtype, s64=False)
