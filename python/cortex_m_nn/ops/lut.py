"""``cortex_m_nn::lut``: any int8 → int8 element-wise function through a 256-entry table.

CMSIS-NN has no s8 kernel for sigmoid, tanh, hardswish, hardsigmoid, gelu, silu, leaky_relu
or elu (nor for a relu/clamp that cannot become a producer's activation range), and none is
needed: with int8 input and output, such a function is a map from 256 values to 256 values.
The table is computed at compile time (:func:`lookup_table`, the TFLite Micro "prepare"
step) and stored in the ``.pte`` as a constant; the kernel only looks values up. No CMSIS-NN
function is called.

Kernel contract (``op_lut.cpp``, registered as
``cortex_m_nn::lut.out(Tensor input, Tensor table, *, Tensor(a!) out) -> Tensor(a!)``)::

    input  int8[N]    any shape, any layout: the op is element-wise
    table  int8[256]  table[i] is the output for the input value i - 128
    out    int8[N]    same shape as input

    for (i = 0; i < N; i++) out[i] = table[(uint8_t)(in[i] + 128)];

``(uint8_t)(in[i] + 128)`` equals ``(uint8_t)in[i] ^ 0x80``: index 0 holds the output for
-128, index 128 the output for 0, index 255 the output for 127. No rounding mode, no
arithmetic and no scratch: the result is identical on every ISA; in and out may alias.

The table entry for input ``q`` is ``quantize_out(f(dequantize_in(q)))`` computed with the
same torch operators, in the same order and precision (float32), as the PT2E reference graph
``dequantize_per_tensor → f → quantize_per_tensor`` (round half to even, clamp to int8), so
the lowered op reproduces the reference's int8 values. One caveat is torch's, not the
table's: torch's CPU kernels compute the last few elements of a tensor (fewer than two
vector widths) with a scalar path whose float32 result may differ from the vectorised one
by one ULP (seen for sigmoid, gelu, silu). That changes an int8 value only when f(x) lands
within that ULP of a rounding boundary. That was never seen (2,000 random quantizations per
function; the tests compare sampled tables with the scalar path entry by entry), and
``verify``'s ≤ 1 LSB bound per operator would cover it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
import torch.ao.quantization.fx._decomposed  # noqa: F401  (registers quantized_decomposed)

from cortex_m_nn.ops.library import define_operator

#: Entries of a table: one per int8 value.
TABLE_SIZE = 256
#: The table index of input value ``q`` is ``q + INDEX_OFFSET``.
INDEX_OFFSET = 128

FloatFunction = Callable[[torch.Tensor], torch.Tensor]


def lookup_table(
    functions: Sequence[FloatFunction],
    input_scale: float,
    input_zero_point: int,
    output_scale: float,
    output_zero_point: int,
    channels: int = 0,
) -> torch.Tensor:
    """int8[256]: ``quantize(f_n(…f_1(dequantize(q))))`` for q = -128 … 127, as PT2E computes it.

    The 256 inputs are dequantized, passed through ``functions`` in order and quantized by
    PT2E's own ``quantized_decomposed`` operators on one float32 tensor. With ``channels``
    (> 0) the functions get the inputs as ``[1, channels, 256]`` (channel dim 1, as a PReLU
    slope broadcasts) and the result is ``int8[channels, 256]``. A function not defined on
    some input of the range (NaN, e.g. ``sqrt`` of a negative value) is a ``ValueError``.
    """
    decomposed = torch.ops.quantized_decomposed
    inputs = torch.arange(-INDEX_OFFSET, TABLE_SIZE - INDEX_OFFSET, dtype=torch.int8)
    if channels:
        inputs = inputs.expand(1, channels, TABLE_SIZE).contiguous()
    x = decomposed.dequantize_per_tensor(
        inputs, float(input_scale), int(input_zero_point), -128, 127, torch.int8
    )
    for function in functions:
        x = function(x)
    if x.dtype != torch.float32 or x.shape != inputs.shape:
        raise ValueError(f"element-wise function returned {x.dtype}{list(x.shape)}")
    undefined = torch.isnan(x)
    if undefined.any():
        values = inputs[undefined].unique()
        raise ValueError(
            f"the function is undefined (NaN) for {values.numel()} of the 256 int8 inputs"
            f" (from {int(values[0])} to {int(values[-1])})"
        )
    table = decomposed.quantize_per_tensor(
        x, float(output_scale), int(output_zero_point), -128, 127, torch.int8
    )
    return table.reshape(channels, TABLE_SIZE) if channels else table


def _check(input: torch.Tensor, table: torch.Tensor) -> None:
    if input.dtype != torch.int8:
        raise ValueError(f"lut input must be int8, got {input.dtype}")
    shape = tuple(table.shape)
    channels = shape[0] if len(shape) == 2 else 1
    if table.dtype != torch.int8 or shape not in ((TABLE_SIZE,), (channels, TABLE_SIZE)):
        raise ValueError(
            f"lut table must be int8[{TABLE_SIZE}] or int8[C, {TABLE_SIZE}],"
            f" got {table.dtype}{list(table.shape)}"
        )
    if channels > 1 and (input.dim() == 0 or input.shape[-1] != channels):
        raise ValueError(
            f"{channels} per-channel tables need the input's innermost dim to be {channels},"
            f" got {list(input.shape)}"
        )


def _fake(input: torch.Tensor, table: torch.Tensor) -> torch.Tensor:
    _check(input, table)
    return torch.empty_like(input, dtype=torch.int8, memory_format=torch.contiguous_format)


@define_operator("lut", "Tensor input, Tensor table", _fake)
def lut(input: torch.Tensor, table: torch.Tensor) -> torch.Tensor:
    """Reference: ``out[i] = table[i % C][in[i] + 128]`` for every element (C = 1: one table)."""
    _check(input, table)
    rows = table.reshape(-1, TABLE_SIZE)
    channel = torch.arange(input.numel()).reshape(input.shape) % rows.shape[0]
    return rows[channel, input.to(torch.int64) + INDEX_OFFSET].contiguous()
