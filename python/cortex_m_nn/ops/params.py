"""Prepared parameters shared by each operator family, read from a call's arguments by name.

An operator's schema (``operators.yaml``, :data:`~cortex_m_nn.ops.library.SCHEMAS`) is the one
place its argument order is written. A family's references and fake implementations take
``*arguments`` and read them into one frozen struct by schema name (:func:`named`), so
conv2d, depthwise and transpose convolution share :class:`ConvParams`, the two pools
:class:`PoolParams`, and every operator that requantizes an int32 accumulator to int8 the
output stage :class:`Requantization`. A new dtype case of an operator (int16 activations,
int4 weights) is then a new case of the same struct and reference, not a copy of the file.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from cortex_m_nn.core.abi import Rounding
from cortex_m_nn.ops.arithmetic import (
    reduce_multiplier,
    requantize,
    requantize_s64,
    wrap_int32,
)
from cortex_m_nn.ops.broadcast import broadcast_shape
from cortex_m_nn.ops.library import SCHEMAS


def named(operator: str, arguments: Sequence[Any], skip: int = 0) -> dict[str, Any]:
    """``arguments`` (the schema's, from position ``skip`` on) by their schema names."""
    names = [part.split()[-1] for part in SCHEMAS[operator].split(",")][skip:]
    return dict(zip(names, arguments, strict=False))


def pair(name: str, value: Sequence[int]) -> Sequence[int]:
    """An ``(h, w)`` argument (returned as given); ValueError unless it has two entries."""
    if len(value) != 2:
        raise ValueError(f"{name} must have two entries (h, w), got {list(value)}")
    return value


#: Names the output stage's multiplier and shift have in the schemas.
_MULTIPLIERS = ("multipliers", "multiplier", "output_multiplier")
_SHIFTS = ("shifts", "shift", "output_shift")


@dataclass(frozen=True)
class Requantization:
    """Output stage: int32 accumulator -> requantize (per channel or per tensor), add the output
    offset, clamp to the activation range, int8."""

    multipliers: torch.Tensor | int
    shifts: torch.Tensor | int
    output_offset: int
    activation_min: int
    activation_max: int

    @classmethod
    def of(cls, values: dict[str, Any]) -> Requantization:
        """From arguments named ``multipliers``/``shifts`` (or ``multiplier``/``shift``,
        ``output_multiplier``/``output_shift``), ``output_offset``, ``activation_min`` and
        ``activation_max``."""
        multipliers = next(values[k] for k in _MULTIPLIERS if k in values)
        shifts = next(values[k] for k in _SHIFTS if k in values)
        # kept as given (the references widen them in ``requantize``): fake kernels build these
        # params for the geometry alone, and a conversion there costs a dispatch per call
        return cls(
            multipliers,
            shifts,
            values["output_offset"],
            values["activation_min"],
            values["activation_max"],
        )

    def apply(
        self,
        acc: torch.Tensor,
        rounding: Rounding,
        dtype: torch.dtype = torch.int8,
        s64: bool | None = None,
    ) -> torch.Tensor:
        """Accumulators (bias added) → outputs of ``dtype``: from int32 accumulators with
        ``arm_nn_requantize`` (``rounding``), or, with ``s64`` (default: for int16 outputs),
        from int64 ones with ``arm_nn_requantize_s64`` and the multiplier reduced to Q15 (the
        s16 matrix kernels' stage). The s16 element-wise kernels keep the int32 stage."""
        wide = dtype is torch.int16 if s64 is None else s64
        if wide:
            out = requantize_s64(acc, reduce_multiplier(self.multipliers), self.shifts)
        else:
            out = requantize(wrap_int32(acc), self.multipliers, self.shifts, rounding)
        return (out + self.output_offset).clamp(self.activation_min, self.activation_max).to(dtype)


def int16_sums_fit(weight: torch.Tensor) -> bool:
    """Whether every output channel (dim 0) of an int8 weight keeps ``sum |w| * 2^15`` (the
    largest int16 dot product with it) below 2^31."""
    rows = weight.to(torch.int64).abs().reshape(weight.shape[0], -1).sum(dim=1)
    return bool(torch.all(rows * 32768 < 2**31))


def output_size(
    size: int, kernel: int, stride: int, padding: int, dilation: int, end: int | None = None
) -> int:
    """Output extent of a padded, strided, dilated window along one dimension (``end``: the
    padding after the input when it differs from ``padding``, the padding before it)."""
    end = padding if end is None else end
    return (size + padding + end - dilation * (kernel - 1) - 1) // stride + 1


def sides(padding: Sequence[int]) -> tuple[int, int, int, int]:
    """A convolution's ``padding`` as (top, left, bottom, right): ``[h, w]`` pads both sides
    alike, ``[top, left, bottom, right]`` pads the end as TensorFlow's SAME does (by the start
    or one more). ValueError for any other length."""
    if len(padding) == 2:
        return padding[0], padding[1], padding[0], padding[1]
    if len(padding) == 4:
        return padding[0], padding[1], padding[2], padding[3]
    raise ValueError(
        f"padding must have two entries (h, w) or four (top, left, bottom, right), got "
        f"{list(padding)}"
    )


def patches(
    input: torch.Tensor,
    kernel: tuple[int, int],
    stride: list[int],
    padding: list[int],
    dilation: list[int],
    pad_value: int = 0,
) -> torch.Tensor:
    """Windows of an NHWC tensor as ``[N, OH, OW, C, KH, KW]`` (a view of the padded input;
    ``padding`` as :func:`sides` reads it)."""
    top, left, bottom, right = sides(padding)
    padded = torch.nn.functional.pad(input, (0, 0, left, right, top, bottom), value=pad_value)
    span_h = dilation[0] * (kernel[0] - 1) + 1
    span_w = dilation[1] * (kernel[1] - 1) + 1
    windows = padded.unfold(1, span_h, stride[0]).unfold(2, span_w, stride[1])
    return windows[..., :: dilation[0], :: dilation[1]]


@dataclass(frozen=True)
class ConvParams:
    """What conv2d, depthwise_conv2d and transpose_conv2d share: bias, input offset, window
    geometry and the per-channel output stage. ``dilation`` is ``[1, 1]`` where the operator
    has none, ``output_padding`` ``[0, 0]``, ``depth_multiplier`` 1."""

    bias: torch.Tensor
    input_offset: int
    stride: list[int]
    padding: list[int]
    dilation: list[int]
    output_padding: list[int]
    depth_multiplier: int
    output: Requantization
    #: which CMSIS-NN function computes an int8 call (``core.cmsis_nn``: 0 the wrapper's)
    path: int = 0

    @classmethod
    def of(cls, operator: str, arguments: Sequence[Any]) -> ConvParams:
        """From a call's arguments after ``input, weight`` (schema order)."""
        values = named(operator, arguments, skip=2)
        return cls(
            values["bias"],  # int32; ``finish`` adds it to int64 accumulators
            values["input_offset"],
            values["stride"],
            values["padding"],
            values.get("dilation", [1, 1]),
            values.get("output_padding", [0, 0]),
            values.get("depth_multiplier", 1),
            Requantization.of(values),
            values.get("path", 0),
        )

    @staticmethod
    def check(input: torch.Tensor, weight: torch.Tensor) -> None:
        """4-D operands; ValueError otherwise."""
        if input.dim() != 4 or weight.dim() != 4:
            raise ValueError(
                f"expected 4-D input and weight, got {tuple(input.shape)} and {tuple(weight.shape)}"
            )

    def check_window(self, name: str) -> list[int]:
        """Two-entry stride, padding and window argument ``name`` (dilation or
        output_padding), in that order; the latter's value."""
        pair("stride", self.stride)
        pair("padding", self.padding)
        return pair(name, getattr(self, name))

    def check_forward_window(self, kernel: Sequence[int]) -> None:
        """A forward convolution's window: two-entry stride and dilation, both >= 1; padding
        as :func:`sides` reads it, >= 0, and where the end differs from the start, less than
        the dilated kernel's extent (every output window overlaps the input). CMSIS-NN takes
        the top/left pad and reads past the bottom/right edge as far as the output dims make
        it, so any such end is one it computes: TensorFlow's SAME (the start or one more) and
        a patch-based stage's strips (``plan.patch``: a pad at the image border only).
        ValueError otherwise."""
        pair("stride", self.stride)
        pair("dilation", self.dilation)
        top, left, bottom, right = sides(self.padding)
        if min(*self.stride, *self.dilation) < 1 or min(top, left, bottom, right) < 0:
            raise ValueError(
                f"invalid stride {self.stride}, padding {self.padding} or dilation {self.dilation}"
            )
        for start, end, k, d in zip(
            (top, left), (bottom, right), kernel, self.dilation, strict=True
        ):
            if end != start and end > d * (k - 1):
                raise ValueError(
                    f"padding {self.padding}: an end that differs from its start pads less "
                    f"than the kernel's extent"
                )

    def output_hw(self, input_hw: Sequence[int], kernel: Sequence[int]) -> tuple[int, int]:
        """(OH, OW) of a forward convolution (PyTorch's formula, each side's padding)."""
        top, left, bottom, right = sides(self.padding)
        return (
            output_size(input_hw[0], kernel[0], self.stride[0], top, self.dilation[0], bottom),
            output_size(input_hw[1], kernel[1], self.stride[1], left, self.dilation[1], right),
        )

    def windows(self, input: torch.Tensor, kernel: tuple[int, int]) -> torch.Tensor:
        """``(x + input_offset)`` as int64 windows ``[N, OH, OW, C, KH, KW]``."""
        shifted = input.to(torch.int64) + self.input_offset
        return patches(shifted, kernel, self.stride, self.padding, self.dilation)

    def finish(
        self, acc: torch.Tensor, rounding: Rounding, dtype: torch.dtype = torch.int8
    ) -> torch.Tensor:
        """Add the bias to the accumulators and requantize them: int8 from int32 ones, int16
        from int64 ones (:meth:`Requantization.apply`)."""
        return self.output.apply(acc + self.bias, rounding, dtype)

    def check_s16(self) -> None:
        """The int16 case's arguments (CMSIS-NN's s16 kernels): offsets 0 (zero points 0),
        an int64 bias, shifts at most 14 (``arm_nn_requantize_s64``), the range in int16.
        ValueError."""
        out = self.output
        if self.input_offset != 0 or out.output_offset != 0:
            raise ValueError("int16 activations have zero points 0: offsets must be 0")
        if self.bias.dtype is not torch.int64:
            raise ValueError(f"the int16 case's bias is int64, got {self.bias.dtype}")
        if not -32768 <= out.activation_min <= out.activation_max <= 32767:
            raise ValueError("the int16 case's activation range must lie in int16")
        if torch.any(torch.as_tensor(out.shifts) > 14):
            raise ValueError("the int16 case's shifts are at most 14 (arm_nn_requantize_s64)")


def pool_output_size(size: int, kernel: int, stride: int, padding: int, ceil_mode: bool) -> int:
    """PyTorch's pooled extent (dilation 1); in ceil mode the last window starts in bounds."""
    out = (size + 2 * padding - kernel + (stride - 1 if ceil_mode else 0)) // stride + 1
    if ceil_mode and (out - 1) * stride >= size + padding:
        out -= 1
    return out


@dataclass(frozen=True)
class PoolParams:
    """What avg_pool2d and max_pool2d share: window, stride, padding, ceil mode, range."""

    kernel_size: list[int]
    stride: list[int]
    padding: list[int]
    ceil_mode: bool
    activation_min: int
    activation_max: int

    @classmethod
    def of(cls, operator: str, arguments: Sequence[Any]) -> PoolParams:
        """From a call's arguments after ``input`` (schema order); ValueError if malformed."""
        values = named(operator, arguments, skip=1)
        kernel_size, stride, padding = (
            pair(name, values[name]) for name in ("kernel_size", "stride", "padding")
        )
        if min(*kernel_size, *stride) < 1 or min(padding) < 0:
            raise ValueError(
                f"invalid kernel_size {kernel_size}, stride {stride}, padding {padding}"
            )
        return cls(
            kernel_size,
            stride,
            padding,
            bool(values.get("ceil_mode", False)),
            values["activation_min"],
            values["activation_max"],
        )

    def output_hw(self, input: torch.Tensor) -> tuple[int, int]:
        """The pooled height and width of an NHWC ``input``; ValueError if not 4-D or empty."""
        if input.dim() != 4:
            raise ValueError(f"expected a 4-D NHWC input, got {tuple(input.shape)}")
        (kh, kw), (sh, sw), (ph, pw) = self.kernel_size, self.stride, self.padding
        oh = pool_output_size(input.shape[1], kh, sh, ph, self.ceil_mode)
        ow = pool_output_size(input.shape[2], kw, sw, pw, self.ceil_mode)
        if oh < 1 or ow < 1:
            shape = tuple(input.shape)
            raise ValueError(f"pooling {shape} with kernel {self.kernel_size} is empty")
        return oh, ow

    def windows(self, values: torch.Tensor, fill: int) -> torch.Tensor:
        """Every output's window of NHWC ``values`` ``[N, OH, OW, C, KH, KW]``: padded with
        ``fill`` above and left by the padding, below and right as far as the last window
        reaches (ceil mode)."""
        (kh, kw), (sh, sw), (ph, pw) = self.kernel_size, self.stride, self.padding
        oh, ow = self.output_hw(values)
        _, h, w, _ = values.shape
        bottom, right = max(0, (oh - 1) * sh + kh - h - ph), max(0, (ow - 1) * sw + kw - w - pw)
        padded = torch.nn.functional.pad(values, (0, 0, pw, right, ph, bottom), value=fill)
        return padded.unfold(1, kh, sh).unfold(2, kw, sw)[:, :oh, :ow]

    def clamp(self, values: torch.Tensor, dtype: torch.dtype = torch.int8) -> torch.Tensor:
        """Clamp to the activation range, as ``dtype`` (int8, or int16 for an int16 input,
        whose range must then lie in int16: ValueError)."""
        if (
            dtype is torch.int16
            and not -32768 <= self.activation_min <= self.activation_max <= 32767
        ):
            raise ValueError("the int16 case's activation range must lie in int16")
        return values.clamp(self.activation_min, self.activation_max).to(dtype)


@dataclass(frozen=True)
class ElementwiseScales:
    """Scales and zero points of a binary element-wise operator's inputs and output, from which
    add, sub and mul compute their integer arguments (:func:`add_parameters` and kin)."""

    input1_scale: float
    input2_scale: float
    output_scale: float
    input1_zero_point: int = 0
    input2_zero_point: int = 0
    output_zero_point: int = 0

    def offsets(self) -> tuple[int, int, int]:
        """``(input1_offset, input2_offset, output_offset)``: -zp, -zp, +zp."""
        return -self.input1_zero_point, -self.input2_zero_point, self.output_zero_point


@dataclass(frozen=True)
class ElementwiseParams:
    """What the binary element-wise operators that requantize share (add, sub as add, mul):
    the inputs' offsets and the output stage (``output_multiplier``, ``output_shift``)."""

    input1_offset: int
    input2_offset: int
    output: Requantization

    @classmethod
    def of(cls, values: dict[str, Any]) -> ElementwiseParams:
        """From a call's arguments by name (:func:`named`)."""
        return cls(values["input1_offset"], values["input2_offset"], Requantization.of(values))

    def check_dtype(self, operator: str, input1: torch.Tensor, input2: torch.Tensor) -> None:
        """Both inputs int8, or both int16 with zero offsets and an int16 range (the s16
        element-wise kernels ignore their offsets); ValueError otherwise."""
        if input1.dtype is not input2.dtype or input1.dtype not in (torch.int8, torch.int16):
            raise ValueError(f"{operator} takes two int8 or two int16 inputs")
        if input1.dtype is torch.int16:
            offsets = (self.input1_offset, self.input2_offset, self.output.output_offset)
            if any(offsets):
                raise ValueError(f"int16 {operator} has zero points 0: offsets must be 0")
            out = self.output
            if not -32768 <= out.activation_min <= out.activation_max <= 32767:
                raise ValueError(f"int16 {operator}'s activation range must lie in int16")

    def operands(
        self, operator: str, input1: torch.Tensor, input2: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``x + offset`` of both inputs as int64, broadcast to the output shape."""
        shape = broadcast_shape(operator, input1.shape, input2.shape)
        return (
            (input1.to(torch.int64) + self.input1_offset).expand(shape),
            (input2.to(torch.int64) + self.input2_offset).expand(shape),
        )
