"""``cortex_m_nn::transpose``: an int8 tensor with its dimensions permuted (``arm_transpose_s8``);
an int16 one (int16 activations) by our own loop, CMSIS-NN having no s16 transpose.

Reference: ``input.permute(permutation)``, contiguous. ``output.shape[i] ==
input.shape[permutation[i]]`` (NumPy/PyTorch convention, as CMSIS-NN's ``permutations``).
The lowering collapses every transpose first (size-1 dims dropped, dims that stay adjacent
merged), so it emits only ranks 2-4, never an identity and never a 4-D permutation that keeps
dims 0 and 1 in place. The reference enforces what the C function needs:

* rank 1 is a copy; rank 2 must be ``[1, 0]`` (the C code swaps the two dims whatever the
  permutation says); ranks 3 and 4 take any non-identity permutation (with MVE, a 4-D
  permutation starting ``0, 1`` takes a path that always swaps dims 2 and 3, so the identity
  would come out wrong);
* dims the C code counts in ``uint16_t`` (both dims of rank 2; dims 2 and 3 of a 4-D
  permutation starting ``0, 1``) are at most 65535.

C call (dims left-aligned in ``{n, h, w, c}``, unused fields 1)::

    rank 2: input_dims = {d0, d1, 1, 1}     output_dims = {d1, d0, 1, 1}
    rank 3: input_dims = {d0, d1, d2, 1}    output_dims = {o0, o1, o2, 1}
    rank 4: input_dims = {d0, d1, d2, d3}   output_dims = {o0, o1, o2, o3}
    const uint32_t perm[] = permutation;   (as uint32_t)
    cmsis_nn_transpose_params params = {.num_dims = rank, .permutations = perm};
    arm_transpose_s8(input, output, &input_dims, &output_dims, &params)
"""

from __future__ import annotations

import torch

from cortex_m_nn.ops.library import define_operator

#: Largest dim the C code's ``uint16_t`` row/column counts hold.
UINT16_MAX = 65535


def check_transpose(shape: list[int] | tuple[int, ...], permutation: list[int]) -> None:
    """Raise ValueError unless ``arm_transpose_s8`` permutes ``shape`` by ``permutation``."""
    rank = len(shape)
    if not 1 <= rank <= 4:
        raise ValueError(f"arm_transpose_s8 handles 1-4 dims, got {rank}")
    if sorted(permutation) != list(range(rank)):
        raise ValueError(f"{list(permutation)} is not a permutation of {rank} dims")
    if rank >= 2 and list(permutation) == list(range(rank)):
        raise ValueError("identity transpose: a view, emit no operator")
    if rank == 2:
        narrow = [0, 1]
    elif rank == 4 and list(permutation[:2]) == [0, 1]:
        narrow = [2, 3]
    else:
        narrow = []
    if any(shape[d] > UINT16_MAX for d in narrow):
        raise ValueError(f"dims {narrow} of {list(shape)} exceed the C code's uint16 counts")


def _fake(input: torch.Tensor, permutation: list[int]) -> torch.Tensor:
    check_transpose(tuple(input.shape), permutation)
    dtype = torch.int16 if input.dtype is torch.int16 else torch.int8
    return input.new_empty([input.shape[d] for d in permutation], dtype=dtype)


@define_operator("transpose", "Tensor input, int[] permutation", _fake)
def transpose(input: torch.Tensor, permutation: list[int]) -> torch.Tensor:
    """Reference ``arm_transpose_s8``."""
    check_transpose(tuple(input.shape), permutation)
    return input.permute(list(permutation)).contiguous()
