"""``cortex_m_nn::batch_matmul``: int8 batched matrix product with per-tensor requantization.

Reference for ``arm_batch_matmul_s8``, which multiplies rows by rows: the right operand is
given **transposed**. For ``lhs [..., M, K]`` and ``rhs_transposed [..., N, K]``::

    acc[..., m, n] = sum_k (lhs[..., m, k] + lhs_offset) * (rhs_transposed[..., n, k] + rhs_offset)
    out[..., m, n] = clamp(requantize(acc, multiplier, shift) + output_offset, min, max)

in int32 (wrapping), with no bias. Up to two leading batch dimensions broadcast NumPy-style
(equal, or 1 on one side). Offsets: ``lhs_offset = -lhs_zero_point``,
``rhs_offset = -rhs_zero_point``, ``output_offset = output_zero_point``.

C++ kernel mapping (``arm_batch_matmul_s8``): pad both operand shapes on the left with 1s to
4-D ``[B0, B1, rows, K]``, then

* ``input_lhs_dims = {B0, B1, M, K}``, ``input_rhs_dims = {B0', B1', N, K}``,
  ``output_dims = {max(B0, B0'), max(B1, B1'), M, N}`` (the out tensor's shape padded alike).
* ``bmm_params = {.adj_x = false, .adj_y = false, .fc_params = {.input_offset = lhs_offset,
  .filter_offset = rhs_offset, .output_offset = output_offset, .activation = {min, max}}}``.
* ``quant_params = {multiplier, shift}`` (``cmsis_nn_per_tensor_quant_params``).
* ``ctx = {scratch, scratch_bytes}``: the MVE build keeps one int32 kernel sum per rhs row
  there (``4 * N`` bytes) and rejects a NULL buffer; DSP and scalar builds need none.

int16 activations are the other case (``arm_batch_matmul_s16``): both operands and the result
int16, every offset 0 (the kernel ignores them), no scratch. Each sum of products is exact in
int64 on every ISA (``SMLALD``, MVE's ``VMLALDAVA`` or the C loop), and the output stage is
``arm_nn_requantize_s64`` with the multiplier reduced to Q15 (:meth:`Requantization.apply` with
``torch.int16``), so the shift is at most 14.
"""

from __future__ import annotations

from typing import Any

import torch

from cortex_m_nn.ops.arithmetic import Rounding
from cortex_m_nn.ops.library import define_operator
from cortex_m_nn.ops.params import Requantization, named

#: CMSIS-NN's dims have two batch dimensions (n, h) in front of rows (w) and columns (c).
MAX_RANK = 4


def output_shape(lhs_shape: tuple[int, ...], rhs_shape: tuple[int, ...]) -> tuple[int, ...]:
    """The result's shape; raises ValueError for operands CMSIS-NN cannot multiply."""
    if not 2 <= len(lhs_shape) <= MAX_RANK or not 2 <= len(rhs_shape) <= MAX_RANK:
        raise ValueError(f"batch_matmul takes 2-D to 4-D operands, got {lhs_shape} and {rhs_shape}")
    if lhs_shape[-1] != rhs_shape[-1]:
        raise ValueError(
            f"lhs {list(lhs_shape)} and transposed rhs {list(rhs_shape)} differ in the inner "
            "dimension (the rhs is [..., N, K])"
        )
    try:
        batch = torch.broadcast_shapes(lhs_shape[:-2], rhs_shape[:-2])
    except RuntimeError as error:
        raise ValueError(
            f"batch dimensions of {lhs_shape} and {rhs_shape} do not broadcast"
        ) from error
    return (*batch, lhs_shape[-2], rhs_shape[-2])


def _fake(lhs: torch.Tensor, rhs_transposed: torch.Tensor, *arguments: Any) -> torch.Tensor:
    shape = output_shape(tuple(lhs.shape), tuple(rhs_transposed.shape))
    return lhs.new_empty(shape, dtype=torch.int16 if lhs.dtype is torch.int16 else torch.int8)


@define_operator(
    "batch_matmul",
    "Tensor lhs, Tensor rhs_transposed, int lhs_offset, int rhs_offset, int output_offset,"
    " int multiplier, int shift, int activation_min, int activation_max, int scratch_bytes",
    _fake,
    scratch=True,
)
def batch_matmul(
    lhs: torch.Tensor, rhs_transposed: torch.Tensor, *arguments: Any, rounding: Rounding
) -> torch.Tensor:
    """Reference ``arm_batch_matmul_s8``: ``[..., M, K]`` x ``[..., N, K]`` → ``[..., M, N]``;
    ``arguments`` as the schema lists them after the operands."""
    values = named("batch_matmul", arguments, skip=2)
    output_shape(tuple(lhs.shape), tuple(rhs_transposed.shape))
    if torch.int16 in (lhs.dtype, rhs_transposed.dtype):
        return _batch_matmul_s16(lhs, rhs_transposed, values)
    left = lhs.to(torch.int64) + values["lhs_offset"]
    right = rhs_transposed.to(torch.int64) + values["rhs_offset"]
    acc = torch.matmul(left, right.transpose(-2, -1))
    return Requantization.of(values).apply(acc, rounding)


def _batch_matmul_s16(
    lhs: torch.Tensor, rhs_transposed: torch.Tensor, values: dict[str, Any]
) -> torch.Tensor:
    """``arm_batch_matmul_s16``; ValueError for arguments it does not take."""
    if lhs.dtype is not torch.int16 or rhs_transposed.dtype is not torch.int16:
        raise ValueError("int16 batch_matmul takes two int16 operands")
    offsets = values["lhs_offset"], values["rhs_offset"], values["output_offset"]
    if offsets != (0, 0, 0):
        raise ValueError("int16 batch_matmul has zero points 0: every offset must be 0")
    if not (0 <= values["multiplier"] <= 2**31 - 1 and -31 <= values["shift"] <= 14):
        raise ValueError("int16 batch_matmul's multiplier is in [0, 2^31), its shift in [-31, 14]")
    if not -32768 <= values["activation_min"] <= values["activation_max"] <= 32767:
        raise ValueError("int16 batch_matmul's activation range must lie in int16")
    acc = torch.matmul(lhs.to(torch.int64), rhs_transposed.to(torch.int64).transpose(-2, -1))
    return Requantization.of(values).apply(acc, Rounding.DOUBLE, torch.int16)
