"""Layers PyTorch lacks that cortex_m_nn lowers: :class:`SVDF`, and :class:`Streaming`, an
``nn.GRU`` or ``nn.LSTM`` that keeps its state from one call to the next.

An SVDF layer (singular value decomposition filter, TFLite's ``SVDF``) keeps a state of the
last ``memory_size`` feature projections of every filter. Its float step is two operators of
the ``cortex_m_nn_float`` namespace, so ``torch.export`` keeps each as one node and the
quantizer sees the state between them as one tensor (TFLite's int16 ``activation_state``):

* ``svdf_memory(input, state, weights_feature, state_bits)``: the state shifted one step
  left, the projection ``input @ weights_feature.T`` written into its newest (last) slot;
* ``svdf_time(state, weights_time, bias, rank)``: each filter's state row dotted with its
  time weights, groups of ``rank`` filters summed, the bias added.

``state_bits`` (16, TFLite's default, or 8) chooses the integer case the compiler lowers to
(``arm_svdf_state_s16_s8`` or ``arm_svdf_s8``); the float arithmetic ignores it. Both
operators have exact gradients, so the layer trains like any other: on a sequence
``[B, T, I]`` the steps are differentiable through the state.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import nn

from cortex_m_nn.core.families import FLOAT_NAMESPACE


@torch.library.custom_op(f"{FLOAT_NAMESPACE}::svdf_memory", mutates_args=())
def svdf_memory(
    input: torch.Tensor, state: torch.Tensor, weights_feature: torch.Tensor, state_bits: int
) -> torch.Tensor:
    """The state ``[B, F, M]`` one step on: shifted left, ``input @ weights_feature.T`` last."""
    projection = input @ weights_feature.T
    return torch.cat([state[..., 1:], projection.unsqueeze(-1)], dim=-1)


@svdf_memory.register_fake
def _memory_fake(
    input: torch.Tensor, state: torch.Tensor, weights_feature: torch.Tensor, state_bits: int
) -> torch.Tensor:
    return torch.empty_like(state)


def _memory_setup(ctx: Any, inputs: tuple[Any, ...], output: torch.Tensor) -> None:
    ctx.save_for_backward(inputs[0], inputs[2])


def _memory_backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
    input, weights_feature = ctx.saved_tensors
    newest = grad[..., -1]
    grad_state = torch.cat([torch.zeros_like(grad[..., :1]), grad[..., :-1]], dim=-1)
    return newest @ weights_feature, grad_state, newest.T @ input, None


svdf_memory.register_autograd(_memory_backward, setup_context=_memory_setup)


@torch.library.custom_op(f"{FLOAT_NAMESPACE}::svdf_time", mutates_args=())
def svdf_time(
    state: torch.Tensor, weights_time: torch.Tensor, bias: torch.Tensor | None, rank: int
) -> torch.Tensor:
    """``[B, F / rank]``: ``Σ_m state·weights_time`` per filter, summed over rank, plus bias."""
    filters = (state * weights_time).sum(-1)
    out = filters.reshape(state.shape[0], -1, rank).sum(-1)
    return out if bias is None else out + bias


@svdf_time.register_fake
def _time_fake(
    state: torch.Tensor, weights_time: torch.Tensor, bias: torch.Tensor | None, rank: int
) -> torch.Tensor:
    return state.new_empty((state.shape[0], state.shape[1] // rank))


def _time_setup(ctx: Any, inputs: tuple[Any, ...], output: torch.Tensor) -> None:
    ctx.save_for_backward(inputs[0], inputs[1])
    ctx.rank, ctx.bias = inputs[3], inputs[2] is not None


def _time_backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
    state, weights_time = ctx.saved_tensors
    per_filter = grad.repeat_interleave(ctx.rank, dim=1).unsqueeze(-1)
    grad_bias = grad.sum(0) if ctx.bias else None
    return per_filter * weights_time, (per_filter * state).sum(0), grad_bias, None


svdf_time.register_autograd(_time_backward, setup_context=_time_setup)

#: The two operators as the targets of an exported graph's nodes.
SVDF_MEMORY = svdf_memory._opoverload
SVDF_TIME = svdf_time._opoverload
#: The two float operators of an SVDF step.
SVDF_OPS = {SVDF_MEMORY, SVDF_TIME}


class SVDF(nn.Module):
    """TFLite's SVDF layer: ``num_filters = num_units · rank`` filters, each a feature
    projection of the input and a ``memory_size``-tap filter over its last projections.

    The state ``[batch_size, num_filters, memory_size]`` (newest sample last) is a buffer kept
    between calls, zero at the start (:meth:`reset_state`). ``forward`` takes one frame
    ``[B, input_size]`` (returns ``[B, num_units]``) or a sequence ``[B, T, input_size]``
    (returns ``[B, T, num_units]``); either leaves the state after its last frame.
    ``state_bits``: 16 (default) or 8, the compiled layer's state and time-weight width.
    """

    def __init__(
        self,
        input_size: int,
        num_units: int,
        memory_size: int,
        rank: int = 1,
        bias: bool = True,
        batch_size: int = 1,
        state_bits: int = 16,
    ) -> None:
        super().__init__()
        if min(input_size, num_units, memory_size, rank, batch_size) < 1:
            raise ValueError("SVDF sizes, rank and batch size must be positive")
        if state_bits not in (8, 16):
            raise ValueError(f"SVDF state_bits is 8 or 16, got {state_bits}")
        filters = num_units * rank
        self.rank, self.state_bits = rank, state_bits
        self.weights_feature = nn.Parameter(torch.empty(filters, input_size))
        self.weights_time = nn.Parameter(torch.empty(filters, memory_size))
        self.bias = nn.Parameter(torch.zeros(num_units)) if bias else None
        self.register_buffer("state", torch.zeros(batch_size, filters, memory_size))
        nn.init.uniform_(
            self.weights_feature, -1 / math.sqrt(input_size), 1 / math.sqrt(input_size)
        )
        nn.init.uniform_(self.weights_time, -1 / math.sqrt(memory_size), 1 / math.sqrt(memory_size))

    def reset_state(self) -> None:
        """Forget every frame seen: the state back to zeros."""
        self.state.zero_()

    def step(self, x: torch.Tensor, state: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """One frame from ``state``: (output, the state after it)."""
        state = svdf_memory(x, state, self.weights_feature, self.state_bits)
        return svdf_time(state, self.weights_time, self.bias, self.rank), state

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dim() == 2:
            y, state = self.step(x, self.state)
        elif x.dim() == 3:
            state, outputs = self.state, []
            for t in range(x.shape[1]):
                y, state = self.step(x[:, t], state)
                outputs.append(y)
            y = torch.stack(outputs, dim=1)
        else:
            raise ValueError(f"SVDF takes [B, input_size] or [B, T, input_size], got {x.shape}")
        self.state.copy_(state.detach())
        return y


class Streaming(nn.Module):
    """An ``nn.GRU`` or ``nn.LSTM`` that carries its state from one call to the next:
    streaming, a frame (or a few) per inference, gives the outputs the whole sequence at once
    would.

    The state ``[num_layers, batch_size, hidden_size]`` (an LSTM's hidden state, and its cell
    state in ``cell``) is a buffer, zero at the start (:meth:`reset_state`); ``forward`` runs
    the layer from it on ``x`` (its layout as the layer's ``batch_first`` says), writes the
    final states back, and returns every step's output. Compiled, each layer's states are
    buffers of the program kept between inferences (as an SVDF's): the kernel reads them as
    its initial state and writes its last step into them.
    """

    def __init__(self, layer: nn.GRU | nn.LSTM, batch_size: int = 1) -> None:
        super().__init__()
        if not isinstance(layer, nn.GRU | nn.LSTM) or layer.bidirectional:
            raise ValueError("Streaming takes a unidirectional nn.GRU or nn.LSTM")
        if isinstance(layer, nn.LSTM) and layer.proj_size:
            raise ValueError("Streaming takes an nn.LSTM without projection (proj_size 0)")
        self.layer = layer
        shape = (layer.num_layers, batch_size, layer.hidden_size)
        self.register_buffer("state", torch.zeros(shape))
        self.cell: torch.Tensor | None
        self.register_buffer("cell", torch.zeros(shape) if isinstance(layer, nn.LSTM) else None)

    def reset_state(self) -> None:
        """Forget every frame seen: the states back to zeros."""
        self.state.zero_()
        if self.cell is not None:
            self.cell.zero_()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.cell is None:
            out, state = self.layer(x, self.state)
        else:
            out, (state, cell) = self.layer(x, (self.state, self.cell))
            self.cell.copy_(cell.detach())
        self.state.copy_(state.detach())
        return out
