"""``cortex_m_nn::concat``: int8 tensors copied side by side into one planned output buffer.

Reference: ``torch.cat(inputs, dim)``. All inputs have the same rank (1-4) and the same sizes
except along ``dim``; they share the output's scale and zero point (no arithmetic). The
kernel calls one ``arm_concatenation_s8_{x,y,z,w}`` per input, chosen by ``dim``.

CMSIS-NN's ``x`` is the innermost (contiguous) axis, then ``y``, ``z`` and ``w`` outward, so a
tensor is seen as ``[w, z, y, x]``: left-pad its shape with 1s to 4-D and move ``dim`` the same
way (``d4 = dim + 4 - rank``). For input ``i`` with shape ``[w, z, y, x]`` and ``offset`` the
sum of the earlier inputs' sizes along ``d4`` (output 4-D shape ``[W, Z, Y, X]``)::

    d4 == 3: arm_concatenation_s8_x(in_i, x, y, z, w, out, X, offset)
    d4 == 2: arm_concatenation_s8_y(in_i, x, y, z, w, out, Y, offset)
    d4 == 1: arm_concatenation_s8_z(in_i, x, y, z, w, out, Z, offset)
    d4 == 0: arm_concatenation_s8_w(in_i, x, y, z, w, out, offset)

Sizes are ``uint16_t`` in C: every input dim and the output's size along ``dim`` are at most
65535 (checked here).
"""

from __future__ import annotations

import torch

from cortex_m_nn.ops.library import define_operator
from cortex_m_nn.ops.transpose import UINT16_MAX


def _output_shape(inputs: list[torch.Tensor], dim: int) -> list[int]:
    if not inputs:
        raise ValueError("concat needs at least one input")
    rank = inputs[0].dim()
    if not 1 <= rank <= 4:
        raise ValueError(f"arm_concatenation_s8 handles 1-4 dims, got {rank}")
    if not 0 <= dim < rank:
        raise ValueError(f"dim {dim} is not one of the {rank} dims (give it non-negative)")
    shape = list(inputs[0].shape)
    for tensor in inputs:
        other = list(tensor.shape)
        if len(other) != rank or other[:dim] + other[dim + 1 :] != shape[:dim] + shape[dim + 1 :]:
            raise ValueError(f"cannot concatenate {shape} and {other} along dim {dim}")
        if max(other) > UINT16_MAX:
            raise ValueError(f"input {other} exceeds the C code's uint16 sizes")
    shape[dim] = sum(int(t.shape[dim]) for t in inputs)
    if shape[dim] > UINT16_MAX:
        raise ValueError(f"output size {shape[dim]} along dim {dim} exceeds uint16")
    return shape


def _fake(inputs: list[torch.Tensor], dim: int) -> torch.Tensor:
    return inputs[0].new_empty(_output_shape(inputs, dim), dtype=torch.int8)


@define_operator("concat", "Tensor[] inputs, int dim", _fake)
def concat(inputs: list[torch.Tensor], dim: int) -> torch.Tensor:
    """Reference ``arm_concatenation_s8_{x,y,z,w}``: each input copied at its offset."""
    shape = _output_shape(inputs, dim)
    output = torch.empty(shape, dtype=torch.int8)
    offset = 0
    for tensor in inputs:
        size = int(tensor.shape[dim])
        output.narrow(dim, offset, size).copy_(tensor)
        offset += size
    return output
