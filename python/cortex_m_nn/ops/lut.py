"""``cortex_m_nn::lut``: any int8 → int8 element-wise function through a 256-entry table, or
int16 → int16 through an interpolated table of 513 to 4,097 knots.

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

**int16 case** (int16 activations, zero points 0). A table of all 65,536 values would take
128 KB, so the int16 case samples the function every ``2^b`` inputs (``b`` from 7 down to 4:
513 to 4,097 knots) and interpolates between knots::

    table  int16[(65536 >> b) + 1]   table[j] = quantize_out(f(dequantize_in(-32768 + j << b)))
                                     (the last knot, input 32768, is one step past int16)

    u = in[i] + 32768;  j = u >> b;  frac = u & (2^b - 1)
    out[i] = table[j] + (((table[j + 1] - table[j]) * frac + 2^(b - 1)) >> b)

in int32 (``>>`` floors; the kernel reads ``b`` from the table's length). The result lies
between two knots, so it needs no clamp. This approximates by design: the compiler measures
the largest difference from the exact ``quantize(f(dequantize(q)))`` over all 65,536 inputs
(:func:`interpolation_error`) and takes the smallest table within :data:`INT16_TARGET_ERROR`
(:func:`int16_table`); ``verify`` holds the operator to the error measured. A table that errs
by more than an int8 table's own rounding (:data:`INT16_MAX_ERROR`) is refused by the
lowering. Per-channel tables are int8 only.
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

#: int16 case: log2 of the input values from one knot to the next, coarsest first (tables of
#: 513, 1,025, 2,049 and 4,097 knots).
INT16_STEP_BITS = (7, 6, 5, 4)
#: The error (output LSB) the smallest table within which is taken: a sixteenth of an int8 step.
INT16_TARGET_ERROR = 16
#: The largest interpolation error (output LSB) an int16 table may have: an int8 table's
#: rounding error (half an int8 step) in int16 units.
INT16_MAX_ERROR = 128


def int16_table_size(step_bits: int) -> int:
    """Knots of an int16 table with one knot every ``2^step_bits`` inputs."""
    return (65536 >> step_bits) + 1


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


def _apply(functions: Sequence[FloatFunction], x: torch.Tensor) -> torch.Tensor:
    shape = x.shape
    for function in functions:
        x = function(x)
    if x.dtype != torch.float32 or x.shape != shape:
        raise ValueError(f"element-wise function returned {x.dtype}{list(x.shape)}")
    return x


def _quantize16(x: torch.Tensor, scale: float) -> torch.Tensor:
    """PT2E's ``quantize_per_tensor`` to int16 with zero point 0 (NaN: ValueError)."""
    if torch.isnan(x).any():
        raise ValueError("the function is undefined (NaN) for part of the int16 input range")
    decomposed = torch.ops.quantized_decomposed
    return decomposed.quantize_per_tensor(x, float(scale), 0, -32768, 32767, torch.int16)


def interpolated_table(
    functions: Sequence[FloatFunction], input_scale: float, output_scale: float, step_bits: int
) -> torch.Tensor:
    """int16 knots: the function at inputs -32768, -32768 + 2^step_bits, … 32768 (zero points
    0), dequantized and quantized as PT2E does (float32, round half to even, clamp to int16)."""
    knots = torch.arange(-32768, 32769, 1 << step_bits, dtype=torch.int32)
    x = knots.to(torch.float32) * torch.tensor(float(input_scale), dtype=torch.float32)
    return _quantize16(_apply(functions, x), output_scale)


def exact_int16(
    functions: Sequence[FloatFunction], input_scale: float, output_scale: float
) -> torch.Tensor:
    """int16[65536]: the PT2E reference ``quantize(f(dequantize(q)))`` for q = -32768 … 32767."""
    q = torch.arange(-32768, 32768, dtype=torch.int32).to(torch.int16)
    x = torch.ops.quantized_decomposed.dequantize_per_tensor(
        q, float(input_scale), 0, -32768, 32767, torch.int16
    )
    return _quantize16(_apply(functions, x), output_scale)


def interpolation_error(
    functions: Sequence[FloatFunction],
    input_scale: float,
    output_scale: float,
    table: torch.Tensor,
    exact: torch.Tensor | None = None,
) -> int:
    """The largest |interpolated - exact| (output LSB) over all 65,536 int16 inputs (``exact``:
    :func:`exact_int16`'s values, when the caller has them)."""
    q = torch.arange(-32768, 32768, dtype=torch.int32).to(torch.int16)
    if exact is None:
        exact = exact_int16(functions, input_scale, output_scale)
    return int((lut(q, table).to(torch.int32) - exact.to(torch.int32)).abs().max())


def int16_table(
    functions: Sequence[FloatFunction], input_scale: float, output_scale: float
) -> tuple[torch.Tensor, int]:
    """(table, its error): the smallest table within :data:`INT16_TARGET_ERROR` LSB, else the
    one of least error. ValueError where the function is undefined."""
    best: tuple[torch.Tensor, int] | None = None
    exact = exact_int16(functions, input_scale, output_scale)
    for step_bits in INT16_STEP_BITS:
        table = interpolated_table(functions, input_scale, output_scale, step_bits)
        error = interpolation_error(functions, input_scale, output_scale, table, exact)
        if best is None or error < best[1]:
            best = table, error
        if error <= INT16_TARGET_ERROR:
            break
    assert best is not None
    return best


def step_bits_of(table: torch.Tensor) -> int:
    """``b`` of an int16 table of ``(65536 >> b) + 1`` knots (ValueError for another length)."""
    for step_bits in INT16_STEP_BITS:
        if tuple(table.shape) == (int16_table_size(step_bits),):
            return step_bits
    sizes = ", ".join(str(int16_table_size(b)) for b in INT16_STEP_BITS)
    raise ValueError(f"an int16 lut's table must have {sizes} knots, got {list(table.shape)}")


def _interpolate(input: torch.Tensor, table: torch.Tensor) -> torch.Tensor:
    step_bits = step_bits_of(table)
    u = input.to(torch.int32) + 32768
    index, fraction = u >> step_bits, u & ((1 << step_bits) - 1)
    knots = table.to(torch.int32)
    low, high = knots[index], knots[index + 1]
    half = 1 << (step_bits - 1)
    return (low + (((high - low) * fraction + half) >> step_bits)).to(torch.int16)


def _check(input: torch.Tensor, table: torch.Tensor) -> None:
    if input.dtype == torch.int16:
        if table.dtype != torch.int16:
            raise ValueError(f"an int16 lut's table must be int16, got {table.dtype}")
        step_bits_of(table)
        return
    if input.dtype != torch.int8:
        raise ValueError(f"lut input must be int8 or int16, got {input.dtype}")
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
    return torch.empty_like(input, dtype=input.dtype, memory_format=torch.contiguous_format)


@define_operator("lut", "Tensor input, Tensor table", _fake)
def lut(input: torch.Tensor, table: torch.Tensor) -> torch.Tensor:
    """Reference: ``out[i] = table[i % C][in[i] + 128]`` for every element (C = 1: one table);
    int16: the interpolation above."""
    _check(input, table)
    if input.dtype == torch.int16:
        return _interpolate(input, table).contiguous()
    rows = table.reshape(-1, TABLE_SIZE)
    channel = torch.arange(input.numel()).reshape(input.shape) % rows.shape[0]
    return rows[channel, input.to(torch.int64) + INDEX_OFFSET].contiguous()
