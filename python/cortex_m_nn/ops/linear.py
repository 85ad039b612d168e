"""``cortex_m_nn::linear``: int8 fully connected layer, per-tensor or per-channel requantization.

Reference for ``arm_fully_connected_s8`` and ``arm_fully_connected_per_channel_s8`` (weight
offset 0): for each row of the input, accumulate ``(x + input_offset) * w`` in int32, add the
bias (if any), requantize, add ``output_offset`` and clamp. Input ``[..., in]`` (the leading
dimensions are the batches), weight ``[out, in]``, bias ``[out]``; output ``[..., out]``.

Requantization is a case of the one operator: per tensor with the ``multiplier``/``shift``
numbers (``multipliers``/``shifts`` None), or per output channel with int32 ``[out]``
``multipliers``/``shifts`` (the numbers then 0), for weights quantized per output channel.

int16 activations are the other case (``arm_fully_connected_s16``, 8-bit weights and 16-bit
activations): an int16 input gives an int16 output; the zero points are 0 (both offsets 0),
the bias is int64, requantization per tensor, no kernel sums. The accumulator is the exact
int64 sum (CMSIS-NN adds the first 512 products in int32: with weights in [-127, 127], as
the quantizer makes them, that cannot wrap), and the output stage is
``arm_nn_requantize_s64`` (:meth:`Requantization.apply` with ``torch.int16``).

int4 weights are the third case (``arm_fully_connected_s4``): a uint8 weight ``[out, in / 2]``
of packed pairs (:mod:`cortex_m_nn.ops.int4`), int8 activations, per-tensor requantization
(CMSIS-NN has no per-channel s4 fully connected: the lowering runs per-channel int4 linear
layers as 1x1 ``conv2d``), an int32 bias and no kernel sums (its MVE code sums the weights
itself). The arithmetic is the s8 one.

On MVE, CMSIS-NN ignores the bias and starts each row from a precomputed "kernel sum"
``bias + input_offset * sum(w_row)`` (what ``arm_vector_sum_s8`` writes into ``ctx->buf``).
We compute it at compile time (:func:`kernel_sums`) and pass it as ``kernel_sums`` (bias
``None``); the kernel hands it to CMSIS-NN as the context buffer, so nothing is summed at run
time. In int32 arithmetic both forms give the same accumulator.
"""

from __future__ import annotations

from typing import Any

import torch

from cortex_m_nn.core.cmsis_nn import QUADS, WRAPPER
from cortex_m_nn.ops import int4
from cortex_m_nn.ops.arithmetic import Rounding, wrap_int32
from cortex_m_nn.ops.library import define_operator
from cortex_m_nn.ops.params import Requantization, named


def _fake(input: torch.Tensor, weight: torch.Tensor, *arguments: Any) -> torch.Tensor:
    dtype = torch.int16 if input.dtype is torch.int16 else torch.int8
    return input.new_empty((*input.shape[:-1], weight.shape[0]), dtype=dtype)


@define_operator(
    "linear",
    "Tensor input, Tensor weight, Tensor? bias, Tensor? kernel_sums, Tensor? multipliers,"
    " Tensor? shifts, int input_offset, int output_offset, int multiplier, int shift,"
    " int activation_min, int activation_max, int path",
    _fake,
)
def linear(
    input: torch.Tensor, weight: torch.Tensor, *arguments: Any, rounding: Rounding
) -> torch.Tensor:
    """Reference ``arm_fully_connected_s8`` (``arm_fully_connected_per_channel_s8`` with
    ``multipliers``): int8 ``[..., in]`` x ``[out, in]`` → ``[..., out]``; ``arguments`` as the
    schema lists them after the weight."""
    values = named("linear", arguments, skip=2)
    output = _output_stage(values, weight.shape[0])
    bias, sums = values["bias"], values["kernel_sums"]
    weight, packed = int4.logical_weight(weight)
    per_channel = values["multipliers"] is not None
    if packed and (input.dtype is not torch.int8 or sums is not None or per_channel):
        raise ValueError(
            "int4 linear weights take int8 activations, a bias (no kernel sums) and one "
            "multiplier (arm_fully_connected_s4)"
        )
    if weight.dim() != 2 or input.dim() < 1 or input.shape[-1] != weight.shape[1]:
        raise ValueError(
            f"input {tuple(input.shape)} does not match weight {tuple(weight.shape)} ([out, in])"
        )
    if sums is not None and bias is not None:
        raise ValueError("linear takes a bias or kernel sums (which include it), not both")
    if values["path"] not in (WRAPPER, QUADS) or (
        values["path"] == QUADS and (input.dtype is not torch.int8 or packed)
    ):
        raise ValueError(
            f"linear path {values['path']}: 0 (CMSIS-NN's), or 1 (fully_connected_quads_s8) for "
            "int8 activations and weights"
        )
    if input.dtype is torch.int16:
        return _linear_s16(input, weight, values, output)
    offset = 0 if sums is not None else values["input_offset"]
    acc = (input.to(torch.int64) + offset) @ weight.to(torch.int64).T
    start = sums if sums is not None else bias
    if start is not None:
        acc = acc + start.to(torch.int64)
    return output.apply(acc, rounding)


def _linear_s16(
    input: torch.Tensor, weight: torch.Tensor, values: dict[str, Any], output: Requantization
) -> torch.Tensor:
    """``arm_fully_connected_s16``; ValueError for arguments it does not take."""
    bias = values["bias"]
    if values["input_offset"] != 0 or output.output_offset != 0:
        raise ValueError("int16 linear has zero points 0: input and output offsets must be 0")
    per_channel = values["multipliers"] is not None or values["shifts"] is not None
    if values["kernel_sums"] is not None or per_channel:
        raise ValueError("int16 linear takes no kernel sums and requantizes per tensor")
    if not (0 <= values["multiplier"] <= 2**31 - 1 and -31 <= values["shift"] <= 14):
        raise ValueError("int16 linear's multiplier is in [0, 2^31) and its shift in [-31, 14]")
    if bias is not None and bias.dtype is not torch.int64:
        raise ValueError(f"int16 linear's bias is int64, got {bias.dtype}")
    if not -32768 <= output.activation_min <= output.activation_max <= 32767:
        raise ValueError("int16 linear's activation range must lie in int16")
    acc = input.to(torch.int64) @ weight.to(torch.int64).T
    if bias is not None:
        acc = acc + bias
    return output.apply(acc, Rounding.DOUBLE, torch.int16)


def _output_stage(values: dict[str, Any], out_features: int) -> Requantization:
    """The per-tensor or per-channel requantization the arguments give; ValueError when they
    give both, or per-channel vectors of another length."""
    per_channel = values["multipliers"], values["shifts"]
    if per_channel == (None, None):
        return Requantization.of(
            {**values, "multipliers": values["multiplier"], "shifts": values["shift"]}
        )
    multipliers, shifts = per_channel
    if multipliers is None or shifts is None or (values["multiplier"], values["shift"]) != (0, 0):
        raise ValueError(
            "linear requantizes per tensor (multiplier, shift) or per channel (multipliers and "
            "shifts, the numbers 0), not both"
        )
    if tuple(multipliers.shape) != (out_features,) or tuple(shifts.shape) != (out_features,):
        raise ValueError(f"per-channel multipliers and shifts must be [{out_features}]")
    return Requantization.of(values)


def kernel_sums(weight: torch.Tensor, bias: torch.Tensor | None, input_offset: int) -> torch.Tensor:
    """``arm_vector_sum_s8`` at compile time: int32 ``bias + input_offset * sum(w_row)``."""
    sums = weight.to(torch.int64).sum(dim=1) * input_offset
    if bias is not None:
        sums = sums + bias.to(torch.int64)
    return wrap_int32(sums).to(torch.int32)
