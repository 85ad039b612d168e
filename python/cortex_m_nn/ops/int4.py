"""int4 weights (4w8a): two signed 4-bit values per byte, as CMSIS-NN's ``_s4`` kernels read them.

CMSIS-NN packs the flattened weight tensor continuously, the lower index in the low nibble
(bits 3..0), each nibble a two's-complement int4: ``[1, 2, 3, 4]`` is ``[0x21, 0x43]``.
Our operators carry such weights as a **uint8** tensor whose innermost dimension is half an
even logical one, the same bytes, so the shapes give the logical shape back without another
argument. ``uint8`` is the case: no operator takes uint8 weights otherwise.

* ``conv2d``: ``[Cout, KH, KW * Cin / 2]`` (KW and Cin merged: the kernel takes Cin from its
  input), so a first layer of one input channel and an even kernel width packs too;
* ``depthwise_conv2d``: ``[1, KH, KW, Cout / 2]``; ``linear``: ``[out, in / 2]``.

The quantizer gives int4 weights only where those dims are even (``precision.int4_case``), and
depthwise ones only for an even input channel count: CMSIS-NN's generic s4 depthwise kernel
reads wrong nibbles for an odd one (``docs/int4.md``).

Values are symmetric, in [-7, 7] (:data:`INT4_MIN` … :data:`INT4_MAX`), zero point 0.
"""

from __future__ import annotations

import torch


def pack(values: torch.Tensor) -> torch.Tensor:
    """int8 values in [-8, 7] with an even innermost dim → uint8, two per byte (low nibble
    first); ValueError otherwise."""
    if values.dtype is not torch.int8 or values.dim() == 0 or values.shape[-1] % 2:
        raise ValueError(
            f"int4 packing takes int8 values with an even innermost dim, got {values.dtype}"
            f"{list(values.shape)}"
        )
    if values.numel() and (int(values.min()) < -8 or int(values.max()) > 7):
        raise ValueError("int4 values lie in [-8, 7]")
    nibbles = values.to(torch.int32) & 0xF
    low, high = nibbles[..., 0::2], nibbles[..., 1::2]
    return (low | (high << 4)).to(torch.uint8)


def unpack(packed: torch.Tensor) -> torch.Tensor:
    """uint8 pairs → int8 values, the innermost dim doubled (sign-extended nibbles)."""
    if packed.dtype is not torch.uint8 or packed.dim() == 0:
        raise ValueError(f"packed int4 weights are uint8, got {packed.dtype}")
    bytes_ = packed.to(torch.int32)
    low, high = bytes_ & 0xF, bytes_ >> 4
    pairs = torch.stack((low, high), dim=-1).flatten(-2)
    return torch.where(pairs >= 8, pairs - 16, pairs).to(torch.int8)


def logical_weight(weight: torch.Tensor, in_channels: int = 0) -> tuple[torch.Tensor, bool]:
    """(the int8 weight values, whether they came packed as int4); a packed conv2d weight
    ``[Cout, KH, KW * Cin / 2]`` comes back OHWI for ``in_channels`` = Cin."""
    if weight.dtype is not torch.uint8:
        return weight, False
    values = unpack(weight)
    if weight.dim() == 3:
        if in_channels < 1 or values.shape[2] % in_channels:
            raise ValueError(
                f"packed conv2d weight {list(weight.shape)} does not hold rows of "
                f"KW * {in_channels} input channels"
            )
        values = values.unflatten(2, (values.shape[2] // in_channels, in_channels))
    return values, True


def conv_window(weight: torch.Tensor, in_channels: int) -> tuple[int, int]:
    """(KH, KW) of a conv2d weight: OHWI int8, or packed ``[Cout, KH, KW * Cin / 2]``."""
    if weight.dtype is torch.uint8 and weight.dim() == 3:
        return int(weight.shape[1]), 2 * int(weight.shape[2]) // max(in_channels, 1)
    return int(weight.shape[1]), int(weight.shape[2])
