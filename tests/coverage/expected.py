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
    # -- and the others, by family ----------------------------------------------------------
    "alias.clone": _(FUNCTIONAL, "aten.clone"),
    "alias.detach": _(FUNCTIONAL, "aten.detach"),
    "alias.full_slice": _(FUNCTIONAL, "aten.alias"),
    "alias.to_float": _(FUNCTIONAL, "aten.to.dtype, aten._assert_tensor_metadata"),
    "alias.type_as": _(FUNCTIONAL, "aten.type_as"),
    "attention.multihead": _(
        MOVEMENT, "aten.unflatten, aten.contiguous; scaled_dot_product_attention is beyond issue 12"
    ),
    "attention.sdpa": _(BEYOND, "aten.scaled_dot_product_attention (decompose to bmm + softmax)"),
    "conv.grouped_2": _(CONV, "grouped aten.conv2d (groups=2)"),
    "conv.grouped_3": _(CONV, "grouped aten.conv2d (groups=3)"),
    "dropout.alpha": _(FUNCTIONAL, "aten.alpha_dropout (eval: identity)"),
    "dropout.inplace": _(FUNCTIONAL, "aten.dropout_"),
    "inplace.clamp_": _(FUNCTIONAL, "aten.clamp_"),
    "inplace.dropout_": _(FUNCTIONAL, "aten.dropout_"),
    "inplace.iadd": _(FUNCTIONAL, "aten.add_"),
    "inplace.imul_const": _(FUNCTIONAL, "aten.mul_"),
    "inplace.relu_then_add_": _(FUNCTIONAL, "aten.add_"),
    "join.chunk": _(MOVEMENT, "aten.chunk"),
    "join.split_sizes": _(MOVEMENT, "aten.split_with_sizes"),
    "join.stack": _(MOVEMENT, "aten.stack"),
    "join.unbind": _(MOVEMENT, "aten.unbind"),
    "math.abs": _(BEYOND, "aten.abs"),
    "math.neg": _(BEYOND, "aten.neg (a multiplication by -1)"),
    "math.pow2": _(LAYERS, "aten.pow"),
    "math.rsqrt": _(BEYOND, "aten.abs, aten.rsqrt (LUTs)"),
    "math.rsub_const": _(BEYOND, "aten.rsub (constant minus tensor)"),
    "math.sqrt_abs": _(BEYOND, "aten.abs, aten.sqrt (LUTs)"),
    "norm.groupnorm": _(NORM, "aten.group_norm"),
    "norm.instancenorm2d": _(NORM, "aten.instance_norm (a group norm with a group per channel)"),
    "norm.layernorm": _(NORM, "aten.layer_norm"),
    "norm.layernorm_channels": _(NORM, "aten.layer_norm"),
    "pool.adaptive_avg_3x3": _(BEYOND, "non-uniform adaptive average pool (8x8 to 3x3)"),
    "pool.adaptive_max_1": _(LAYERS, "aten.adaptive_max_pool2d to 1x1 (an amax over H, W)"),
    "pool.global_amax": _(LAYERS, "aten.amax"),
    "prod.log_softmax": _(BEYOND, "aten.log_softmax"),
    "reduce.amax_last": _(LAYERS, "aten.amax"),
    "reduce.max_values": _(LAYERS, "aten.max"),
    "reduce.mean_channels": _(LAYERS, "aten.mean over the channels"),
    "reduce.sum_last": _(LAYERS, "aten.sum"),
    "reduce.sum_spatial": _(LAYERS, "aten.sum"),
    "resize.interpolate_bilinear_size": _(RESIZE, "aten.upsample_bilinear2d"),
    "resize.interpolate_size": _(RESIZE, "aten.upsample_nearest2d"),
    "resize.pixel_unshuffle": _(MOVEMENT, "aten.pixel_unshuffle"),
    "resize.upsample_bilinear2x": _(RESIZE, "aten.upsample_bilinear2d"),
    "resize.upsampling_nearest2d": _(RESIZE, "aten.upsample_nearest2d"),
    "shape.log_softmax_module": _(BEYOND, "aten.log_softmax"),
    "slice.after_cat": _(MOVEMENT, "aten.slice"),
    "slice.channels_head": _(MOVEMENT, "aten.slice"),
    "slice.channels_step2": _(MOVEMENT, "aten.slice"),
    "slice.index_list": _(MOVEMENT, "aten.index"),
    "slice.narrow": _(MOVEMENT, "aten.narrow"),
    "slice.select_channel": _(MOVEMENT, "aten.select"),
    "slice.spatial_step2": _(MOVEMENT, "aten.slice"),
    "slice.width_tail": _(MOVEMENT, "aten.slice"),
    "view.expand": _(MOVEMENT, "aten.expand_as"),
    "view.repeat": _(MOVEMENT, "aten.repeat"),
    "view.roll": _(MOVEMENT, "aten.roll"),
    "view.unflatten": _(MOVEMENT, "aten.unflatten"),
}
