"""``cortex_m_nn::svdf``: one step of an SVDF layer (TFLite semantics), int8 input and output.

Reference for ``arm_svdf_state_s16_s8`` (int16 state and time weights, the default, as
TFLite's converter makes them) and ``arm_svdf_s8`` (int8 state and time weights): one
operator whose case is the state's dtype. Shapes: input ``[B, I]``, state ``[B, F, M]``
(F filters, M = memory size, newest sample last), weights_feature ``[F, I]`` int8,
weights_time ``[F, M]`` of the state's dtype, bias ``[U]`` int32 (U = F / rank) or None,
output ``[B, U]`` int8. The state is updated in place (the schema's ``Tensor(s!)``); it has no
zero point. ``input_offset`` is the input zero point itself, not negated, as CMSIS-NN's
``cmsis_nn_svdf_params.input_offset`` takes it. Per call::

    state[b, f, :M-1] = state[b, f, 1:]                              (shift one step)
    state[b, f, M-1]  = clamp(requantize(Σ_k (x[b,k] - input_offset)·Wf[f,k],
                              input_multiplier, input_shift), state dtype range)
    a[b, f]   = Σ_m state[b, f, m]·Wt[f, m]                          (int32, wraps)
    acc[b, u] = bias[u] + Σ_{r<rank} a[b, u·rank + r]
    y[b, u]   = clamp(requantize(acc, output_multiplier, output_shift) + output_offset,
                      activation_min, activation_max)

The int8-state case clamps the new state to [-128, 127]: the kernel passes that range as
CMSIS-NN's ``input_activation`` (TFLite Micro passes int16's, and an int8 state would wrap).
On MVE, ``arm_svdf_s8`` starts each feature row from a kernel sum ``-input_offset·Σ_k Wf[f,k]``
(``ctx->buf``); the compiler computes it (:func:`svdf_kernel_sums`) and passes ``kernel_sums``,
and the reference then sums ``kernel_sums[f] + Σ_k x·Wf`` instead (the same int32 value).
``scratch_bytes`` holds CMSIS-NN's two int32 buffers, ``B·F`` then ``B·U`` words.
"""

from __future__ import annotations

from typing import Any

import torch

from cortex_m_nn.ops.arithmetic import Rounding, requantize, wrap_int32
from cortex_m_nn.ops.library import define_operator
from cortex_m_nn.ops.linear import kernel_sums
from cortex_m_nn.ops.params import named

#: Name prefix of the buffers that hold an SVDF state in a lowered graph: ``execution_graph``
#: makes them mutable buffers, planned in the arena for the program's lifetime.
STATE_PREFIX = "mutable_state"

#: State dtype → its CMSIS-NN function.
FUNCTIONS = {torch.int16: "arm_svdf_state_s16_s8", torch.int8: "arm_svdf_s8"}


def scratch_bytes(batch: int, filters: int, units: int) -> int:
    """Bytes of CMSIS-NN's two int32 buffers (``input_ctx``: B·F, ``output_ctx``: B·U)."""
    return 4 * batch * (filters + units)


def svdf_kernel_sums(weights_feature: torch.Tensor, input_offset: int) -> torch.Tensor:
    """``arm_vector_sum_s8(…, -input_offset, 0, NULL)`` at compile time (MVE, int8 state)."""
    return kernel_sums(weights_feature, None, -input_offset)


def _fake(input: torch.Tensor, state: torch.Tensor, wf: torch.Tensor, *args: Any) -> torch.Tensor:
    units = wf.shape[0] // max(int(args[3]), 1)
    return input.new_empty((input.shape[0], units), dtype=torch.int8)


def _check(
    input: torch.Tensor,
    state: torch.Tensor,
    wf: torch.Tensor,
    wt: torch.Tensor,
    values: dict[str, Any],
) -> tuple[int, int]:
    """(units, rank) of a valid call; ValueError naming what is wrong otherwise."""
    rank, bias, sums = values["rank"], values["bias"], values["kernel_sums"]
    if state.dtype not in FUNCTIONS or wt.dtype is not state.dtype:
        raise ValueError(
            f"svdf: state and weights_time int8 or int16, got {state.dtype}, {wt.dtype}"
        )
    if input.dtype is not torch.int8 or wf.dtype is not torch.int8 or input.dim() != 2:
        raise ValueError("svdf: int8 input [B, I] and int8 weights_feature [F, I]")
    filters, memory = wt.shape
    if tuple(wf.shape) != (filters, input.shape[1]) or rank < 1 or filters % rank:
        raise ValueError(
            f"svdf: weights_feature {tuple(wf.shape)} for {filters} filters, rank {rank}"
        )
    if tuple(state.shape) != (input.shape[0], filters, memory):
        raise ValueError(f"svdf: state {tuple(state.shape)} is not [B, F, M]")
    units = filters // rank
    if bias is not None and (bias.dtype is not torch.int32 or tuple(bias.shape) != (units,)):
        raise ValueError(f"svdf: bias must be int32 [{units}]")
    if sums is not None and (state.dtype is not torch.int8 or tuple(sums.shape) != (filters,)):
        raise ValueError("svdf: kernel sums (int32 [F]) only with an int8 state")
    return units, rank


@define_operator(
    "svdf",
    "Tensor input, Tensor(s!) state, Tensor weights_feature, Tensor weights_time, Tensor? bias,"
    " Tensor? kernel_sums, int rank, int input_offset, int output_offset, int input_multiplier,"
    " int input_shift, int output_multiplier, int output_shift, int activation_min,"
    " int activation_max, int scratch_bytes",
    _fake,
    scratch=True,
)
def svdf(
    input: torch.Tensor,
    state: torch.Tensor,
    weights_feature: torch.Tensor,
    weights_time: torch.Tensor,
    *arguments: Any,
    rounding: Rounding,
) -> torch.Tensor:
    """Reference: one step, ``state`` updated in place; returns the int8 output ``[B, U]``."""
    values = named("svdf", arguments, skip=4)
    units, rank = _check(input, state, weights_feature, weights_time, values)
    info = torch.iinfo(state.dtype)
    x = input.to(torch.int64)
    w = weights_feature.to(torch.int64)
    sums = values["kernel_sums"]
    if sums is None:
        projection = (x - values["input_offset"]) @ w.T
    else:
        projection = x @ w.T + sums.to(torch.int64)
    newest = requantize(
        wrap_int32(projection), values["input_multiplier"], values["input_shift"], rounding
    ).clamp(info.min, info.max)
    shifted = torch.cat([state[..., 1:].to(torch.int64), newest.unsqueeze(-1)], dim=-1)
    state.copy_(shifted.to(state.dtype))
    a = wrap_int32((shifted * weights_time.to(torch.int64)).sum(-1))
    acc = a.reshape(input.shape[0], units, rank).sum(-1)
    if values["bias"] is not None:
        acc = acc + values["bias"].to(torch.int64)
    out = requantize(wrap_int32(acc), values["output_multiplier"], values["output_shift"], rounding)
    low, high = values["activation_min"], values["activation_max"]
    return (out + values["output_offset"]).clamp(low, high).to(torch.int8)
