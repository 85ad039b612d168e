"""``cortex_m_nn::add``: int8 element-wise addition (and subtraction) of two tensors.

Reference for ``arm_elementwise_add_s8``. Per element::

    a = requantize((x1 + input1_offset) << left_shift, input1_multiplier, input1_shift)
    b = requantize((x2 + input2_offset) << left_shift, input2_multiplier, input2_shift)
    y = clamp(requantize(a + b, output_multiplier, output_shift) + output_offset, min, max)

Shift convention (all three shifts): the one of ``arm_nn_requantize``, positive = left
shift, negative = right shift. TFLite Micro passes its ``QuantizeMultiplierSmallerThanOneExp``
exponents unchanged, so the input and output shifts are normally <= 0; ``left_shift`` is a
plain (non-negative) left shift applied before requantization, 20 for int8.
Offsets: ``inputN_offset = -inputN_zero_point``, ``output_offset = output_zero_point``.
int16 is the other case (``arm_elementwise_add_s16``: the same arithmetic, ``left_shift``
15, zero points 0; it ignores its offsets, so they must be 0).
The DSP build masks each ``x + offset`` to 16 bits before shifting, which agrees with this
only for ``left_shift >= 16``; :func:`add_parameters` always gives 20.

Arguments map one to one onto ``arm_elementwise_add_s8(input_1_vect, input_2_vect,
input1_offset, input1_multiplier, input1_shift, input2_offset, input2_multiplier,
input2_shift, left_shift, output, output_offset, output_multiplier, output_shift,
activation_min, activation_max, block_size)``. The inputs broadcast as
:mod:`cortex_m_nn.ops.broadcast` describes (the kernel calls the function once per output
row, ``block_size`` = the row length).

**Subtraction is this operator with ``input2_multiplier`` negated** (:func:`sub_parameters`);
CMSIS-NN has no s8 subtraction. That is exact, not an approximation: every build of
``arm_nn_requantize`` is sign-agnostic in the multiplier — the default path takes the
rounding doubling high product ``(v·m + 2^30) >> 31`` in 64 bits (C, the Thumb-2
``smull/adc`` assembly and MVE ``vqrdmulh``, which saturates only for INT32_MIN², and
``-m`` is never INT32_MIN) and then divides by 2^-shift rounding halves away from zero;
``CMSIS_NN_USE_SINGLE_ROUNDING`` floors the 64-bit product shifted right (scalar) or
``vqdmulh`` + ``vrshl`` (MVE, the same value for the right shifts add uses). With
``|v| < 2^28`` nothing overflows. So the kernel's output equals this reference bit for bit.
It is not bit-identical to TFLite's SUB, which negates *after* rescaling: the rounding
of the product (both modes) rounds exact halves up, so with ``-m`` a rescaled input 2 is
``-requantize(v, m, s)``, or one unit above it at such a tie (a unit of the intermediate is
``2 · max input scale / 2^20`` in real terms). The
result stays within the add's own error of the real difference (≤ 1 LSB, checked against
float in tests/python/ops/test_elementwise.py), and sub runs CMSIS-NN's MVE/DSP code, not a loop
of ours.
"""

from __future__ import annotations

import torch

from cortex_m_nn.ops.arithmetic import Rounding, quantize_multiplier, requantize, wrap_int32
from cortex_m_nn.ops.broadcast import fake_output
from cortex_m_nn.ops.library import define_operator
from cortex_m_nn.ops.params import ElementwiseParams, ElementwiseScales, named

#: TFLite Micro's ``left_shift`` for int8 add (headroom for the rescaled inputs).
LEFT_SHIFT_INT8 = 20
#: ... and for int16 add (``arm_elementwise_add_s16``): an int16 shifted by 15 stays in int32.
LEFT_SHIFT_INT16 = 15


def add_parameters(
    *scales: float, left_shift: int = LEFT_SHIFT_INT8, **zero_points: int
) -> dict[str, int]:
    """The integer arguments of :func:`add` (all but the activation range), TFLite Micro style.

    Takes ``input1_scale, input2_scale, output_scale`` and the zero points by name, as
    :class:`~cortex_m_nn.ops.params.ElementwiseScales` does. Both inputs are rescaled to twice
    the larger input scale, shifted left by 20 bits, and the sum rescaled to the output scale.
    Keys are the operator's argument names.
    """
    q = ElementwiseScales(*scales, **zero_points)
    input1_offset, input2_offset, output_offset = q.offsets()
    twice_max_input_scale = 2.0 * max(q.input1_scale, q.input2_scale)
    input1_multiplier, input1_shift = quantize_multiplier(q.input1_scale / twice_max_input_scale)
    input2_multiplier, input2_shift = quantize_multiplier(q.input2_scale / twice_max_input_scale)
    output_multiplier, output_shift = quantize_multiplier(
        twice_max_input_scale / ((1 << left_shift) * q.output_scale)
    )
    return {
        "input1_offset": input1_offset,
        "input1_multiplier": input1_multiplier,
        "input1_shift": input1_shift,
        "input2_offset": input2_offset,
        "input2_multiplier": input2_multiplier,
        "input2_shift": input2_shift,
        "left_shift": left_shift,
        "output_offset": output_offset,
        "output_multiplier": output_multiplier,
        "output_shift": output_shift,
    }


def sub_parameters(
    *scales: float, left_shift: int = LEFT_SHIFT_INT8, **zero_points: int
) -> dict[str, int]:
    """The arguments of :func:`add` computing ``input1 - input2``: input 2's multiplier negated
    (arguments as for :func:`add_parameters`).

    See the module docstring for why this is exact for every CMSIS-NN build.
    """
    parameters = add_parameters(*scales, left_shift=left_shift, **zero_points)
    parameters["input2_multiplier"] = -parameters["input2_multiplier"]
    return parameters


def _fake(input1: torch.Tensor, input2: torch.Tensor, *args: int) -> torch.Tensor:
    return fake_output("add", input1, input2)


@define_operator(
    "add",
    "Tensor input1, Tensor input2, int input1_offset, int input1_multiplier, int input1_shift,"
    " int input2_offset, int input2_multiplier, int input2_shift, int left_shift,"
    " int output_offset, int output_multiplier, int output_shift, int activation_min,"
    " int activation_max",
    _fake,
)
def add(
    input1: torch.Tensor, input2: torch.Tensor, *arguments: int, rounding: Rounding
) -> torch.Tensor:
    """Reference ``arm_elementwise_add_s8`` (see the module docstring for the conventions);
    ``arguments`` as the schema lists them after the inputs."""
    values = named("add", arguments, skip=2)
    params = ElementwiseParams.of(values)
    params.check_dtype("add", input1, input2)
    a, b = params.operands("add", input1, input2)
    rescaled = [
        requantize(
            wrap_int32(x << values["left_shift"]),
            values[f"input{n}_multiplier"],
            values[f"input{n}_shift"],
            rounding,
        )
        for n, x in ((1, a), (2, b))
    ]
    return params.output.apply(rescaled[0] + rescaled[1], rounding, input1.dtype, s64=False)
