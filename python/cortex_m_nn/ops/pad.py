"""``cortex_m_nn::pad``: an int8 tensor extended by a constant on each side (``arm_pad_s8``);
an int16 one (int16 activations) by our own loop, CMSIS-NN having no s16 pad.

Reference: an output of shape ``pre_pad[i] + input.shape[i] + post_pad[i]`` filled with
``pad_value`` and the input copied at offset ``pre_pad``. ``pre_pad`` and ``post_pad`` have one
non-negative entry per input dim (1-4 dims). ``pad_value`` is the pad constant already
quantized with the tensor's (shared) scale and zero point.

C call (dims right-aligned in ``{n, h, w, c}``: a rank-r tensor fills the last r fields;
the leading fields are 1 for sizes and 0 for pads)::

    rank 4: input_size = {d0, d1, d2, d3}, pre = {p0, p1, p2, p3}, post = {q0, q1, q2, q3}
    rank 3: input_size = {1, d0, d1, d2},  pre = {0, p0, p1, p2},  post = {0, q0, q1, q2}
    rank 2: input_size = {1, 1, d0, d1},   pre = {0, 0, p0, p1},   post = {0, 0, q0, q1}
    rank 1: input_size = {1, 1, 1, d0},    pre = {0, 0, 0, p0},    post = {0, 0, 0, q0}
    arm_pad_s8(input, output, (int8_t)pad_value, &input_size, &pre, &post)
"""

from __future__ import annotations

import torch

from cortex_m_nn.ops.library import define_operator


def _output_shape(
    input: torch.Tensor, pre_pad: list[int], post_pad: list[int], pad_value: int
) -> list[int]:
    rank = input.dim()
    if not 1 <= rank <= 4:
        raise ValueError(f"arm_pad_s8 handles 1-4 dims, got {rank}")
    if len(pre_pad) != rank or len(post_pad) != rank:
        raise ValueError(f"need {rank} pre and post pads, got {list(pre_pad)}, {list(post_pad)}")
    if min(*pre_pad, *post_pad) < 0:
        raise ValueError(f"negative padding {list(pre_pad)}, {list(post_pad)}")
    low, high = (-32768, 32767) if input.dtype is torch.int16 else (-128, 127)
    if not low <= pad_value <= high:
        raise ValueError(f"pad value {pad_value} is not an {input.dtype}")
    return [p + d + q for p, d, q in zip(pre_pad, input.shape, post_pad, strict=True)]


def _fake(
    input: torch.Tensor, pre_pad: list[int], post_pad: list[int], pad_value: int
) -> torch.Tensor:
    dtype = torch.int16 if input.dtype is torch.int16 else torch.int8
    return input.new_empty(_output_shape(input, pre_pad, post_pad, pad_value), dtype=dtype)


@define_operator("pad", "Tensor input, int[] pre_pad, int[] post_pad, int pad_value", _fake)
def pad(
    input: torch.Tensor, pre_pad: list[int], post_pad: list[int], pad_value: int
) -> torch.Tensor:
    """Reference ``arm_pad_s8`` (an int16 input: the same on int16)."""
    shape = _output_shape(input, pre_pad, post_pad, pad_value)
    dtype = torch.int16 if input.dtype is torch.int16 else torch.int8
    output = torch.full(shape, pad_value, dtype=dtype)
    inside = tuple(slice(p, p + d) for p, d in zip(pre_pad, input.shape, strict=True))
    output[inside] = input
    return output
