"""The corpus models cortex-m-nn cannot lower (or verify) today, and the feature that fixes each.

Measured on the issue-12 base (before its features land). A key is a per-layer case, an
architecture (both cores) or ``architecture@core``; the value names the issue-12 area whose
feature fixes it (the operator the report names first) — remove the entry when it lands:
``test_coverage.py`` marks these ``xfail(strict=True)``, so a fixed model fails until then.
"""

from __future__ import annotations

FUNCTIONAL = "functional (in-place ops to functional forms, aliases and copies removed)"
MOVEMENT = "movement (slices, splits, views and copies of every data movement)"
CONV = "conv (grouped convolution, depthwise multiplier, dilation, asymmetric padding)"
LAYERS = "layers (activations, prelu, reductions, x*x, division by a constant, batch norm)"
RESIZE = "resize (nearest and bilinear interpolation)"
NORM = "norm (LayerNorm and GroupNorm integer kernel)"
#: Operators issue 12 does not list; a case fails until someone adds them.
BEYOND = "beyond issue 12"


def _(area: str, what: str) -> str:
    return f"{area}: {what}"


FAILING: dict[str, str] = {
    # -- architectures (every core) -------------------------------------------------------
    "resnet18": _(FUNCTIONAL, "aten.add_ (out += identity)"),
    "mobilenet_v3_small": _(FUNCTIONAL, "aten.add_ (out += x), aten.dropout_"),
    "efficientnet_b0_stage": _(FUNCTIONAL, "aten.add_ (x += shortcut), aten.dropout_"),
    "shufflenet_v2": _(FUNCTIONAL, "aten.contiguous") + "; " + _(MOVEMENT, "aten.chunk"),
    "mnasnet": _(FUNCTIONAL, "aten.dropout_"),
    "ghostnet": _(FUNCTIONAL, "aten.add_ (x += shortcut), aten.alias (out[:, :self.out_chs])")
    + "; "
    + _(LAYERS, "aten.div by a constant (relu6(x + 3) / 6)"),
    "regnetx": _(CONV, "grouped aten.conv2d (group width 8: groups 3, 6, 12)"),
    "mobilevit": _(NORM, "aten.layer_norm") + "; " + _(MOVEMENT, "aten.chunk (q, k, v)"),
    # -- activations ----------------------------------------------------------------------
    "act.prelu_per_channel": _(LAYERS, "aten.prelu"),
    "act.prelu_single": _(LAYERS, "aten.prelu"),
    "act.selu": _(BEYOND, "aten.selu (a LUT like elu)"),
    "act.celu": _(BEYOND, "aten.celu (a LUT like elu)"),
    "act.mish": _(LAYERS, "aten.mish"),
    "act.softplus": _(LAYERS, "aten.softplus"),
    "act.softsign": _(BEYOND, "aten.abs and aten.div of tensors"),
    "act.logsigmoid": _(BEYOND, "aten.log_sigmoid (a LUT)"),
    # -- norms ----------------------------------------------------------------------------
    "norm.batchnorm2d_alone": _(LAYERS, "unfoldable aten.batch_norm"),
    "norm.layernorm_no_affine": _(NORM, "aten.layer_norm"),
    "norm.groupnorm_one_group": _(NORM, "aten.group_norm"),
    # -- pools, convolutions --------------------------------------------------------------
    "pool.avgpool2d_k3s1p1": _(BEYOND, "avg_pool2d counting the padding (CMSIS-NN does not)"),
    "conv.same_padding": _(CONV, "aten.conv2d.padding (padding='same')"),
    "conv.reflect_padding": _(BEYOND, "aten.pad mode 'reflect'"),
    "conv.grouped_1x1": _(CONV, "grouped aten.conv2d (groups=3)"),
    # -- dropout, resize, shape -----------------------------------------------------------
    "dropout.dropout2d": _(FUNCTIONAL, "aten.feature_dropout (eval: identity)"),
    "resize.upsample_nearest2x": _(RESIZE, "aten.upsample_nearest2d"),
    "resize.upsample_bilinear_align": _(RESIZE, "aten.upsample_bilinear2d"),
    "resize.pixel_shuffle": _(MOVEMENT, "aten.pixel_shuffle"),
    "shape.unflatten_module": _(MOVEMENT, "aten.unflatten"),
    # -- in-place, aliases, views, slices, joins ------------------------------------------
    "inplace.add_": _(FUNCTIONAL, "aten.add_"),
    "inplace.mul_": _(FUNCTIONAL, "aten.mul_"),
    "alias.float": _(FUNCTIONAL, "aten.to.dtype, aten._assert_tensor_metadata"),
    "alias.view_as": _(MOVEMENT, "aten.view_as"),
    "view.movedim": _(MOVEMENT, "aten.movedim"),
    "view.channel_shuffle": _(FUNCTIONAL, "aten.contiguous"),
    "view.flip": _(MOVEMENT, "aten.flip"),
    "slice.channels_middle": _(MOVEMENT, "aten.slice"),
    "slice.crop": _(MOVEMENT, "aten.slice"),
    "slice.select_last": _(MOVEMENT, "aten.select"),
    "slice.index_select": _(MOVEMENT, "aten.index_select"),
    "join.split": _(MOVEMENT, "aten.split"),
    # -- math, reductions, products -------------------------------------------------------
    "math.div_const": _(LAYERS, "aten.div by a constant"),
    "math.exp": _(BEYOND, "aten.exp (a LUT)"),
    "reduce.mean_all": _(LAYERS, "aten.mean over every dimension"),
    "reduce.amax_channels": _(LAYERS, "aten.amax"),
    "prod.einsum": _(BEYOND, "aten.einsum (decompose to bmm)"),
}
