"""The built-in DS-CNN: shape, published size, determinism, RNG hygiene, exportability."""

from __future__ import annotations

import torch

from cortex_m_nn.frontend.models import BUILTIN_MODELS, DEFAULT_MODEL
from cortex_m_nn.frontend.models.ds_cnn import CLASSES, ds_cnn

# Architecture of the MLPerf Tiny KWS DS-CNN, stated independently of the module.
FILTERS, BLOCKS, LABELS = 64, 4, 12
FIRST_KERNEL = (10, 4)
OUT_H, OUT_W = 25, 5  # "same" padding, stride 2, on 49×10


def _published_parameters(with_batch_norm: bool) -> int:
    conv = FIRST_KERNEL[0] * FIRST_KERNEL[1] * 1 * FILTERS + FILTERS
    depthwise = 3 * 3 * FILTERS + FILTERS
    pointwise = FILTERS * FILTERS + FILTERS
    linear = FILTERS * LABELS + LABELS
    total = conv + BLOCKS * (depthwise + pointwise) + linear
    batch_norms = 1 + 2 * BLOCKS
    return total + (batch_norms * 2 * FILTERS if with_batch_norm else 0)


def test_registry_default_is_ds_cnn() -> None:
    assert DEFAULT_MODEL in BUILTIN_MODELS
    assert BUILTIN_MODELS[DEFAULT_MODEL] is ds_cnn


def test_shapes_and_probabilities() -> None:
    model, (x,) = ds_cnn()
    assert not model.training
    assert x.shape == (1, 1, 49, 10)
    assert model.conv(model.pad(x)).shape == (1, FILTERS, OUT_H, OUT_W)
    with torch.no_grad():
        y = model(x)
    assert y.shape == (1, LABELS)
    torch.testing.assert_close(y.sum(), torch.tensor(1.0))
    assert len(CLASSES) == LABELS and model.classes == list(CLASSES)


def test_parameter_count_matches_published_model() -> None:
    model, _ = ds_cnn()
    count = sum(p.numel() for p in model.parameters())
    assert count == _published_parameters(with_batch_norm=False) == 22_604
    # Keras reports 23,756 trainable parameters: the BatchNorms' γ/β folded away here.
    assert _published_parameters(with_batch_norm=True) == 23_756


def test_weights_and_input_are_deterministic() -> None:
    (first, (x1,)), (second, (x2,)) = ds_cnn(), ds_cnn()
    torch.testing.assert_close(x1, x2, rtol=0, atol=0)
    for (name, a), (_, b) in zip(
        first.state_dict().items(), second.state_dict().items(), strict=True
    ):
        torch.testing.assert_close(a, b, rtol=0, atol=0, msg=name)


def test_factory_leaves_global_rng_untouched() -> None:
    torch.manual_seed(1234)
    expected = torch.rand(8)
    torch.manual_seed(1234)
    ds_cnn()
    torch.testing.assert_close(torch.rand(8), expected, rtol=0, atol=0)


def test_exportable() -> None:
    model, inputs = ds_cnn()
    program = torch.export.export(model, inputs, strict=True)
    with torch.no_grad():
        torch.testing.assert_close(program.module()(*inputs), model(*inputs))
    convolutions = [n for n in program.graph.nodes if n.target == torch.ops.aten.conv2d.default]
    assert len(convolutions) == 1 + 2 * BLOCKS
