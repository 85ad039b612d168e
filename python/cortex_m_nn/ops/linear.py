"""``cortex_m_nn::linear``: int8 fully connected layer with per-tensor requantization.

Reference for ``arm_fully_connected_s8`` (weight offset 0): for each row of the input,
accumulate ``(x + input_offset) * w`` in int32, add the bias (if any), requantize with the one
``multiplier``/``shift``, add ``output_offset`` and clamp. Input ``[..., in]`` (the leading
dimensions are the batches), weight ``[out, in]``, bias ``[out]``; output ``[..., out]``.
"""

from __future__ import annotations

import torch

from cortex_m_nn.ops.conv2d import finish
from cortex_m_nn.ops.library import define_operator


def _fake(
    input: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None,
    input_offset: int,
    output_offset: int,
    multiplier: int,
    shift: int,
    activation_min: int,
    activation_max: int,
) -> torch.Tensor:
    return input.new_empty((*input.shape[:-1], weight.shape[0]), dtype=torch.int8)


@define_operator(
    "linear",
    "Tensor input, Tensor weight, Tensor? bias, int input_offset, int output_offset,"
    " int multiplier, int shift, int activation_min, int activation_max, int scratch_bytes",
    _fake,
    scratch=True,
)
def linear(
    input: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None,
    input_offset: int,
    output_offset: int,
    multiplier: int,
    shift: int,
    activation_min: int,
    activation_max: int,
) -> torch.Tensor:
    """Reference ``arm_fully_connected_s8``: int8 ``[..., in]`` x ``[out, in]`` → ``[..., out]``."""
    if weight.dim() != 2 or input.dim() < 1 or input.shape[-1] != weight.shape[1]:
        raise ValueError(
            f"input {tuple(input.shape)} does not match weight {tuple(weight.shape)} ([out, in])"
        )
    acc = (input.to(torch.int64) + input_offset) @ weight.to(torch.int64).T
    if bias is not None:
        acc = acc + bias.to(torch.int64)
    return finish(acc, multiplier, shift, output_offset, activation_min, activation_max)
