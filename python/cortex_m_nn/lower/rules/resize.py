"""Upsampling (``F.interpolate``, ``nn.Upsample``, ``nn.UpsamplingNearest2d/Bilinear2d``) on
4-D int8 tensors → cortex_m_nn::resize.

torch.export presents them as ``aten.upsample_nearest2d.vec(x, output_size, scale_factors)``,
``aten._upsample_nearest_exact2d.vec`` (same arguments) and
``aten.upsample_bilinear2d.vec(x, output_size, align_corners, scale_factors)``: exactly one of
``output_size`` and ``scale_factors`` is given, and the output size is the node's own shape.
The ``.default`` overloads take ``output_size`` and ``scales_h``/``scales_w`` instead. A given
scale factor changes the source coordinates (PyTorch uses ``1 / scale_factor``, not
``in / out``), so it goes into the tables too (see ``ops/resize.py``). The output shares the
input's quantization; the input is read channels-last and the output is channels-last.
Bicubic, antialiased bilinear and 'area' (an adaptive average pool) are other ATen ops.

The 1-D forms on ``[N, C, L]`` (``upsample_nearest1d``, ``_upsample_nearest_exact1d``,
``upsample_linear1d``: one ``scales`` or scale factor) resize an image of height 1: the input
stored channels-last (NLC) is ``[N, 1, L, C]`` (``layout.as_image``), linear is bilinear with
one row, and the output stays NLC.
"""

from __future__ import annotations

from torch.fx import Node

from cortex_m_nn.core.families import RESIZES, RESIZES_1D, aten
from cortex_m_nn.core.refusals import LoweringRefused, Refusal
from cortex_m_nn.lower.context import LoweringContext
from cortex_m_nn.lower.graph_values import QValue
from cortex_m_nn.lower.layout import as_image, moved_input, relayout, reshaped
from cortex_m_nn.lower.registry import Lowered, Pattern, rule
from cortex_m_nn.ops.resize import (
    MAX_SIZE,
    RESIZE_BILINEAR,
    RESIZE_NEAREST,
    bilinear_table,
    nearest_table,
)

NEAREST_EXACT = {aten._upsample_nearest_exact2d.vec, aten._upsample_nearest_exact2d.default}
NEAREST_EXACT |= {aten._upsample_nearest_exact1d.vec, aten._upsample_nearest_exact1d.default}
BILINEAR = {aten.upsample_bilinear2d.vec, aten.upsample_bilinear2d.default}
BILINEAR |= {aten.upsample_linear1d.vec, aten.upsample_linear1d.default}


def _arguments(node: Node) -> dict[str, object]:
    """The op's arguments by schema name, defaults filled in."""
    values: dict[str, object] = {}
    for index, argument in enumerate(node.target._schema.arguments):
        if index < len(node.args):
            values[argument.name] = node.args[index]
        elif argument.name in node.kwargs:
            values[argument.name] = node.kwargs[argument.name]
        else:
            values[argument.name] = argument.default_value if argument.has_default_value() else None
    return values


def _scales(arguments: dict[str, object]) -> tuple[float | None, float | None]:
    """(height, width) scale factors the op was given, None where it was given a size (a 1-D
    op's height: None)."""
    factors = arguments.get("scale_factors")
    if factors is not None:
        *height, width = (float(f) for f in factors)
        return (height[0] if height else None), width
    if "scales" in arguments:
        return None, None if arguments["scales"] is None else float(arguments["scales"])
    pair = [arguments.get("scales_h"), arguments.get("scales_w")]
    height, width = (None if s is None else float(s) for s in pair)
    return height, width


@rule(*sorted(RESIZES, key=str))
def lower_resize(context: LoweringContext, pattern: Pattern) -> Lowered:
    node = pattern.op
    x = moved_input(context, pattern, "resize")
    arguments = _arguments(node)
    one_d = node.target in RESIZES_1D
    if one_d:
        x = as_image(context, x)  # [N, C, L] as [N, C, 1, L], stored NLC
    (n, channels, height, width), out_w = x.shape, pattern.shape[-1]
    out_h = 1 if one_d else pattern.shape[2]
    if max(height, width, out_h, out_w) > MAX_SIZE:
        raise LoweringRefused(
            Refusal.RESIZE_SIZE, f"resize {height}x{width} → {out_h}x{out_w}: int16 index tables"
        )
    if (out_h, out_w) == (height, width):  # every mode copies a same-size input
        same = QValue(x.node, x.scale, x.zero_point, x.shape, x.nhwc)
        return Lowered(reshaped(context, same, pattern.shape), "view", "(identity)")
    scale_h, scale_w = _scales(arguments)
    if node.target in BILINEAR:
        corners = bool(arguments.get("align_corners"))
        mode, what = RESIZE_BILINEAR, "bilinear, Q11 weights"
        rows = bilinear_table(height, out_h, corners, scale_h)
        columns = bilinear_table(width, out_w, corners, scale_w)
    else:
        exact = node.target in NEAREST_EXACT
        mode, what = RESIZE_NEAREST, "nearest-exact" if exact else "nearest"
        rows = nearest_table(height, out_h, scale_h, exact)
        columns = nearest_table(width, out_w, scale_w, exact)
    x = relayout(context, x, nhwc=True)
    out = context.call(
        "resize", x.node, *context.constants(node.name, rows=rows, columns=columns), mode
    )
    value = QValue(out, x.scale, x.zero_point, (n, channels, out_h, out_w), nhwc=True)
    value = reshaped(context, value, pattern.shape)  # a 1-D one's [N, C, L], NLC
    table_bytes = 2 * (rows.numel() + columns.numel())
    return Lowered(value, "resize", f"(resize: {what})", weight_bytes=table_bytes)
