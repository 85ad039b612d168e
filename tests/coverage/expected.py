"""The corpus models cortex-m-nn cannot lower (or verify) today, and the feature that fixes each.

Measured after issue 12's first features landed (functional form, data movement, grouped
convolution, tables and reductions, resize, layer norm); the rest is still open. A key is a
per-layer case, an architecture (both cores) or ``architecture@core``; the value names the
issue-12 area whose
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
    # -- architectures (every core): none today ------------------------------------------
    # -- activations ----------------------------------------------------------------------
    "act.softsign": _(BEYOND, "aten.abs and aten.div of tensors"),
    # -- pools, convolutions --------------------------------------------------------------
    "pool.avgpool2d_k3s1p1": _(BEYOND, "avg_pool2d counting the padding (CMSIS-NN does not)"),
    "conv.reflect_padding": _(BEYOND, "aten.pad mode 'reflect'"),
    # -- dropout, resize, shape -----------------------------------------------------------
    "dropout.dropout2d": _(FUNCTIONAL, "aten.feature_dropout (eval: identity)"),
    # -- in-place, aliases, views, slices, joins ------------------------------------------
    "alias.view_as": _(MOVEMENT, "aten.view_as"),
    "slice.index_select": _(MOVEMENT, "aten.index_select"),
    # -- math, reductions, products -------------------------------------------------------
    "prod.einsum": _(BEYOND, "aten.einsum (decompose to bmm)"),
    # -- and the others, by family ----------------------------------------------------------
    "attention.multihead": _(BEYOND, "aten.scaled_dot_product_attention (as attention.sdpa)"),
    "attention.sdpa": _(BEYOND, "aten.scaled_dot_product_attention (decompose to bmm + softmax)"),
    "dropout.alpha": _(FUNCTIONAL, "aten.alpha_dropout (eval: identity)"),
    "norm.instancenorm2d": _(NORM, "aten.instance_norm (a group norm with a group per channel)"),
    "pool.adaptive_avg_3x3": _(BEYOND, "non-uniform adaptive average pool (8x8 to 3x3)"),
    "pool.adaptive_max_1": _(LAYERS, "aten.adaptive_max_pool2d to 1x1 (an amax over H, W)"),
    "prod.log_softmax": _(BEYOND, "aten.log_softmax"),
    "reduce.max_values": _(LAYERS, "aten.max"),
    "shape.log_softmax_module": _(BEYOND, "aten.log_softmax"),
    "slice.index_list": _(MOVEMENT, "aten.index"),
    "view.expand": _(MOVEMENT, "aten.expand_as"),
}
