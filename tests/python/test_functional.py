"""Functional form first (``passes.functional``): in-place operators, aliases and no-op copies
as ordinary PyTorch code writes them.

Each row of ``MODELS`` is a tiny model using one pattern. Its export in functional form holds
no in-place operator and no no-op copy, and computes what the float model computes (to float
rounding); the model compiles for cortex-m55 with no fallback and verifies (≤ 1 LSB per
operator against the PT2E reference, SNR against the float model). A write into a model input
that nothing else sees is made functional with a note in the report; the refusals (a mutation
of an input whose old value is read or whose new value is not, of a buffer, or through a view)
are one line from the command line, naming the operator, its source line and the rewrite.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from cortex_m_nn.check.harness import check_dialect
from cortex_m_nn.core.errors import CompileError
from cortex_m_nn.core.target import Target
from cortex_m_nn.frontend.calibration import synthetic
from cortex_m_nn.frontend.functional import NO_OPS, functional_form, is_in_place
from cortex_m_nn.frontend.model_source import ModelSource
from cortex_m_nn.pipeline import export

from .activation_models import Function
from .models import seeded
from .test_cli import error_line, run

aten = torch.ops.aten


class BasicBlock(nn.Module):
    """A ResNet basic block as published code writes it: inplace ReLU, ``out += identity``."""

    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(4, 4, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(4)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(4, 4, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        identity = self.relu(x * 1.0)  # the block input of a network: not the model's input
        out = self.relu(self.bn1(self.conv1(identity)))
        out = self.bn2(self.conv2(out))
        out += identity
        return self.relu(out)


class InvertedResidual(nn.Module):
    """MobileNetV3 / EfficientNet style: expand (inplace hardswish), project, ``x += shortcut``."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Conv2d(3, 4, 3, padding=1)
        self.expand = nn.Sequential(nn.Conv2d(4, 8, 1), nn.Hardswish(inplace=True))
        self.project = nn.Conv2d(8, 4, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        shortcut = self.stem(x)
        y = self.project(self.expand(shortcut))
        y += shortcut
        return y


class InPlaceActivations(nn.Module):
    """ReLU6, Hardtanh and ReLU as inplace layers after convolutions."""

    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Sequential(nn.Conv2d(3, 6, 3, padding=1), nn.ReLU6(inplace=True))
        self.conv2 = nn.Sequential(nn.Conv2d(6, 6, 3, padding=1), nn.Hardtanh(-1.0, 1.0, True))
        self.conv3 = nn.Conv2d(6, 4, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.relu(self.conv3(self.conv2(self.conv1(x))), inplace=True)


class TableActivations(nn.Module):
    """Activations lowered to tables, called in place (layers and tensor methods)."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.silu = nn.SiLU(inplace=True)
        self.leaky = nn.LeakyReLU(0.1, inplace=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.leaky(self.silu(self.conv(x)))
        return y.sigmoid_().tanh_()


class DropoutHead(nn.Module):
    """A classifier head: pool, flatten, ``nn.Dropout(inplace=True)``, linear."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.dropout = nn.Dropout(0.2, inplace=True)
        self.fc = nn.Linear(8, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(self.dropout(torch.flatten(self.pool(self.conv(x)), 1)))


class MulInPlace(nn.Module):
    """``x.mul_(2)`` on a convolution's output."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.conv(x)
        y.mul_(2)
        return y


class AddThenReuse(nn.Module):
    """``a.add_(b)``, then ``a`` read twice: every later read sees the sum."""

    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, 4, 1)
        self.conv2 = nn.Conv2d(3, 4, 1)
        self.conv3 = nn.Conv2d(4, 4, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        a, b = self.conv1(x), self.conv2(x)
        a.add_(b)
        b.sub_(a)
        return self.conv3(a) + b


class ClampThenReuse(nn.Module):
    """``y.clamp_(0, 6)`` and ``y.relu_()``, then ``y`` read by a later operator."""

    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, 4, 3, padding=1)
        self.conv2 = nn.Conv2d(4, 4, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.conv1(x)
        y.clamp_(0, 6)
        z = self.conv2(y).relu_()
        return z + y


class Copies(nn.Module):
    """clone, contiguous, detach, alias, same-dtype to / type_as / float(), a tensor constant."""

    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, 4, 3, padding=1)
        self.conv2 = nn.Conv2d(4, 4, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.conv1(x).clone().contiguous().detach()
        y = aten.alias(y).to(torch.float32).type_as(x).float().to(x)
        y = y.to("cpu", copy=True).clone(memory_format=torch.channels_last)
        return self.conv2(y * torch.tensor(1.5))  # a constant: lift_fresh_copy


class ChannelsLast(nn.Module):
    """``x.to(memory_format=torch.channels_last)`` and ``contiguous(channels_last)``."""

    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, 4, 3, padding=1)
        self.conv2 = nn.Conv2d(4, 4, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.conv1(x.to(memory_format=torch.channels_last))
        return self.conv2(y.contiguous(memory_format=torch.channels_last)).contiguous()


class GhostSlice(nn.Module):
    """GhostNet: a concat sliced to ``out_chs`` channels that are all there, then narrowed."""

    def __init__(self) -> None:
        super().__init__()
        self.out_chs = 8
        self.primary = nn.Conv2d(3, 4, 1)
        self.cheap = nn.Conv2d(4, 4, 3, padding=1, groups=4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        a = self.primary(x)
        out = torch.cat([a, self.cheap(a)], dim=1)
        out = out[:, : self.out_chs]
        out = out[:, :, -6:, :100]  # also whole: 6 rows from the end of 6
        return out.narrow(1, 0, self.out_chs)


class ThroughIdentityAlias(nn.Module):
    """``z = y[:, :]`` and ``d = y.detach()`` hold ``y``'s elements: ``z.relu_()`` changes ``y``
    and ``d`` too, and a view of ``y`` made afterwards."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.fc = nn.Linear(4 * 6 * 6, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.conv(x)
        z, d = y[:, :], y.detach()
        z.relu_()
        return self.fc((y + z + d).flatten(1)) + self.fc(y.flatten(1))


class ViewThenDropout(nn.Module):
    """An in-place op on a view whose base nothing reads afterwards."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.fc = nn.Linear(4 * 6 * 6, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.conv(x).view(1, -1)
        y.relu_()
        return self.fc(y)


class InPlaceOnInput(nn.Module):
    """The first layer ``nn.ReLU(inplace=True)`` on the model input: nothing else reads the
    input, so the write into it is dropped (a note in the report)."""

    def __init__(self) -> None:
        super().__init__()
        self.relu = nn.ReLU(inplace=True)
        self.conv = nn.Conv2d(3, 4, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(self.relu(x))


class ScaledInPlaceOnInput(nn.Module):
    """``x.mul_(0.5)`` on the model input, then ``x`` read: the float model halves its input
    in place each call, the graph computes ``x * 0.5`` into a new tensor."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x.mul_(0.5)
        return self.conv(x) + x.mean()


class CopyNotAlias(nn.Module):
    """``contiguous()`` of a transpose copies: ``z.relu_()`` leaves ``t`` alone."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        t = self.conv(x).transpose(2, 3)
        z = t.contiguous()
        z.relu_()
        return t + z


SHAPE = (1, 3, 6, 6)
#: name → (model, input shape, the functional ATen ops its functional form holds)
MODELS = {
    "basic_block_plus_equals": (BasicBlock, (1, 4, 6, 6), {"aten.add.Tensor", "aten.relu"}),
    "inverted_residual": (InvertedResidual, SHAPE, {"aten.add.Tensor", "aten.hardswish"}),
    "inplace_relu6_hardtanh_relu": (InPlaceActivations, SHAPE, {"aten.hardtanh", "aten.relu"}),
    "inplace_table_activations": (
        TableActivations,
        SHAPE,
        {"aten.silu", "aten.leaky_relu", "aten.sigmoid", "aten.tanh"},
    ),
    "inplace_dropout_head": (DropoutHead, SHAPE, {"aten.dropout"}),
    "mul_in_place": (MulInPlace, SHAPE, {"aten.mul.Tensor"}),
    "add_then_reuse": (AddThenReuse, SHAPE, {"aten.add.Tensor", "aten.sub.Tensor"}),
    "clamp_then_reuse": (ClampThenReuse, SHAPE, {"aten.clamp", "aten.relu"}),
    "copies": (Copies, SHAPE, set()),
    "channels_last": (ChannelsLast, SHAPE, set()),
    "identity_slice_after_cat": (GhostSlice, SHAPE, {"aten.cat"}),
    "through_identity_alias": (ThroughIdentityAlias, SHAPE, {"aten.relu", "aten.add.Tensor"}),
    "in_place_on_a_view": (ViewThenDropout, SHAPE, {"aten.relu"}),
    "contiguous_copy_then_in_place": (CopyNotAlias, SHAPE, {"aten.relu", "aten.add.Tensor"}),
    "in_place_on_the_model_input": (InPlaceOnInput, SHAPE, {"aten.relu"}),
    "scaled_in_place_on_the_model_input": (ScaledInPlaceOnInput, SHAPE, {"aten.mul.Tensor"}),
}
#: The models of ``MODELS`` writing into their input: name → the in-place op the note names.
NOTED = {
    "in_place_on_the_model_input": "aten.relu_",
    "scaled_in_place_on_the_model_input": "aten.mul_.Tensor",
}


class HalfAdd(nn.Module):
    """In place, ``y.add_(x)`` keeps float16 ``y``'s dtype where ``y + x`` promotes."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = x.to(torch.float16)
        y.add_(x)
        return y.float()


class PowInPlace(nn.Module):
    """``pow_`` (``aten.pow_.Scalar``) whose functional overload has another name."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = x * 2
        y.pow_(2)
        return y


#: Functional form only (no lowering of these): name → (model, the ATen ops it holds)
FORM_ONLY = {
    "in_place_keeps_the_written_dtype": (HalfAdd, {"aten.add.Tensor", "aten.to.dtype"}),
    "overload_of_another_name": (PowInPlace, {"aten.pow.Tensor_Scalar"}),
}


def functional(module: nn.Module, inputs: tuple[torch.Tensor, ...]) -> torch.fx.GraphModule:
    graph_module = export(ModelSource("m", module, inputs))
    functional_form(graph_module)
    return graph_module


def op_names(graph_module: torch.fx.GraphModule) -> set[str]:
    return {
        str(n.target).removeprefix("aten.").join(("aten.", "")).removesuffix(".default")
        for n in graph_module.graph.nodes
        if n.op == "call_function" and isinstance(n.target, torch._ops.OpOverload)
    }


@pytest.mark.parametrize("name", sorted(MODELS))
def test_functional_form_computes_the_float_model(name: str) -> None:
    factory, shape, expected = MODELS[name]
    module, inputs = seeded(factory, *shape)
    graph_module = functional(module, inputs)
    nodes = [n for n in graph_module.graph.nodes if n.op == "call_function"]
    assert not [n for n in nodes if is_in_place(n)]
    assert not [n.target for n in nodes if n.target in NO_OPS]
    assert expected <= op_names(graph_module), op_names(graph_module)
    for sample in synthetic(inputs, count=3).samples:
        with torch.no_grad():
            want = module(*(x.clone() for x in sample))
            # equal up to float summation order (channels-last memory convolves in another)
            torch.testing.assert_close(graph_module(*sample), want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name", sorted(MODELS))
def test_only_a_write_into_the_model_input_is_noted(name: str) -> None:
    changes = functional_form(export(ModelSource("m", *seeded(MODELS[name][0], *MODELS[name][1]))))
    if name not in NOTED:
        assert changes.notes == []
        return
    (note,) = changes.notes
    assert note.startswith(f"{NOTED[name]} at ") and "test_functional.py:" in note, note
    assert note.endswith(
        "writes into the model input x: computed into a new tensor; the input keeps its value"
    )


@pytest.mark.parametrize("name", sorted(FORM_ONLY))
def test_functional_form_only(name: str) -> None:
    factory, expected = FORM_ONLY[name]
    module, inputs = seeded(factory, *SHAPE)
    graph_module = functional(module, inputs)
    assert not [n for n in graph_module.graph.nodes if is_in_place(n)]
    assert expected <= op_names(graph_module), op_names(graph_module)
    torch.testing.assert_close(graph_module(*inputs), module(*inputs), rtol=0, atol=0)


def body(function: Callable[[torch.Tensor], torch.Tensor]) -> Callable[[], nn.Module]:
    """A factory of ``function`` as a model (one operator of ``passes.equivalents``)."""
    return lambda: Function(function)


def running_statistics(norm: nn.InstanceNorm2d) -> nn.InstanceNorm2d:
    """``norm`` with running statistics as training leaves them (not 0 and 1)."""
    norm.running_mean.normal_()
    norm.running_var.uniform_(0.5, 2.0)
    return norm


#: Rewritten exactly (``passes.equivalents``): name → (model, the ATen op it was, the ops its
#: functional form holds instead); the functional form computes the same floats.
EQUIVALENTS = {
    "feature_dropout_eval": (lambda: nn.Dropout2d(0.1), "aten.feature_dropout", {"aten.dropout"}),
    "alpha_dropout_eval": (lambda: nn.AlphaDropout(0.1), "aten.alpha_dropout", {"aten.dropout"}),
    "feature_alpha_dropout_eval": (
        lambda: nn.FeatureAlphaDropout(0.1),
        "aten.feature_alpha_dropout",
        {"aten.dropout"},
    ),
    "view_as": (body(lambda x: x.flatten(2).view_as(x)), "aten.view_as", {"aten.reshape"}),
    "expand_as": (
        body(lambda x: x.mean((2, 3), keepdim=True).expand_as(x) + x),
        "aten.expand_as",
        {"aten.expand"},
    ),
    "max_values": (body(lambda x: x.max(1).values), "aten.max.dim", {"aten.amax"}),
    "min_values_keepdim": (body(lambda x: x.min(-1, True)[0]), "aten.min.dim", {"aten.amin"}),
    "adaptive_max_to_1": (
        lambda: nn.AdaptiveMaxPool2d(1),
        "aten.adaptive_max_pool2d",
        {"aten.amax"},
    ),
    "adaptive_max_uniform": (
        lambda: nn.AdaptiveMaxPool2d((3, 2)),
        "aten.adaptive_max_pool2d",
        {"aten.max_pool2d"},
    ),
    "adaptive_max_1d_uniform": (
        body(lambda x: F.adaptive_max_pool1d(x.flatten(2), 4)),
        "aten.adaptive_max_pool1d",
        {"aten.max_pool1d"},
    ),
    "instance_norm": (
        lambda: nn.InstanceNorm2d(3, affine=True),
        "aten.instance_norm",
        {"aten.group_norm"},
    ),
    "instance_norm_running_stats": (
        lambda: running_statistics(nn.InstanceNorm2d(3, affine=True, track_running_stats=True)),
        "aten.instance_norm",
        {"aten.batch_norm"},
    ),
    "index_select_step": (
        body(lambda x: x.index_select(3, torch.tensor([0, 2, 4]))),
        "aten.index_select",
        {"aten.slice.Tensor"},
    ),
    "index_list_runs": (
        body(lambda x: x[:, :, [4, 5, -6, 2]]),
        "aten.index.Tensor",
        {"aten.slice.Tensor", "aten.cat"},
    ),
}
#: Left as they are (not the same function, or not known before the model runs):
#: name → (model, the ATen op that stays).
NOT_EQUIVALENT = {
    "feature_dropout_training": (
        body(lambda x: F.dropout2d(x, 0.1, training=True)),
        "aten.feature_dropout",
    ),
    "max_with_indices_read": (body(lambda x: x.max(1)[1].float() + x.max(1)[0]), "aten.max.dim"),
    "adaptive_max_non_uniform": (lambda: nn.AdaptiveMaxPool2d(4), "aten.adaptive_max_pool2d"),
    "instance_norm_updating_running_stats": (
        body(lambda x: F.instance_norm(x, torch.zeros(3), torch.ones(3), use_input_stats=True)),
        "aten.instance_norm",
    ),
    "index_computed": (body(lambda x: x[:, x[0, :, 0, 0].argsort()]), "aten.index.Tensor"),
}


@pytest.mark.parametrize("name", sorted(EQUIVALENTS))
def test_operators_without_a_rule_become_equivalent_ones(name: str) -> None:
    factory, before, after = EQUIVALENTS[name]
    module, inputs = seeded(factory, *SHAPE)
    graph_module = export(ModelSource("m", module, inputs))
    assert before in op_names(graph_module)
    changes = functional_form(graph_module)
    assert before not in op_names(graph_module) and after <= op_names(graph_module)
    assert changes.equivalent == [before]
    for sample in synthetic(inputs, count=3).samples:
        with torch.no_grad():  # to the bit, but group norm sums in another order
            got, want = graph_module(*sample), module(*sample)
            tolerance = 1e-6 if name == "instance_norm" else 0.0
            torch.testing.assert_close(got, want, rtol=tolerance, atol=tolerance)


@pytest.mark.parametrize("name", sorted(NOT_EQUIVALENT))
def test_operators_that_are_not_equivalent_stay(name: str) -> None:
    factory, op = NOT_EQUIVALENT[name]
    graph_module = functional(*seeded(factory, *SHAPE))
    assert op in op_names(graph_module), op_names(graph_module)


#: Average pools that count their padding (PyTorch's default): name → (pool, rewritten as the
#: zero-padded input's pool without padding). divisor_override is left alone, and so is a pool
#: in ceil_mode whose last window PyTorch drops as it lies in the right padding alone.
COUNTING_PADDING = {
    "3x3_stride_1": (lambda: nn.AvgPool2d(3, 1, 1), True),
    "rectangular": (lambda: nn.AvgPool2d((3, 2), 2, (1, 1)), True),
    "1d": (body(lambda x: F.avg_pool1d(x.flatten(2), 3, 2, 1)), True),
    "valid_only": (lambda: nn.AvgPool2d(3, 1, 1, count_include_pad=False), False),
    "ceil_mode": (lambda: nn.AvgPool2d(3, 2, 1, ceil_mode=True), True),
    "ceil_mode_window_in_padding": (lambda: nn.AvgPool2d(2, 7, 1, ceil_mode=True), False),
    "divisor_override": (lambda: nn.AvgPool2d(3, 1, 1, divisor_override=4), False),
}


@pytest.mark.parametrize("name", sorted(COUNTING_PADDING))
def test_average_pool_counting_its_padding_pads_first(name: str) -> None:
    factory, rewritten = COUNTING_PADDING[name]
    module, inputs = seeded(factory, *SHAPE)
    graph_module = functional(module, inputs)
    pools = [n for n in graph_module.graph.nodes if "avg_pool" in str(n.target)]
    assert len(pools) == 1
    padded = "aten.constant_pad_nd" in op_names(graph_module)
    assert padded == rewritten
    if rewritten:
        assert list(pools[0].args[3]) in ([0], [0, 0])
    for sample in synthetic(inputs, count=3).samples:
        with torch.no_grad():
            torch.testing.assert_close(graph_module(*sample), module(*sample), rtol=0, atol=0)


class NoFunctionalForm(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = x * 2
        y.normal_()
        return y


def test_in_place_op_without_functional_form_is_refused() -> None:
    with pytest.raises(CompileError) as error:
        functional(*seeded(NoFunctionalForm, *SHAPE))
    message = str(error.value)
    assert message.startswith("aten.normal_ at ") and "has no functional form" in message
    assert "rewrite: compute into a new tensor" in message and "\n" not in message


@pytest.mark.parametrize("name", sorted(MODELS))
def test_compiles_without_fallback_and_verifies(name: str) -> None:
    factory, shape, _ = MODELS[name]
    module, inputs = seeded(factory, *shape)
    calibration = synthetic(inputs, count=4)
    samples = [tuple(x.clone() for x in sample) for sample in calibration.samples]
    compiled, verification = check_dialect(
        module, inputs, target=Target.parse("cortex-m55"), calibration=calibration
    )
    assert not compiled.stages.lowering.fallbacks
    # verification ran the float model on copies: a model writing into its input left the
    # samples as they were
    for before, after in zip(samples, calibration.samples, strict=True):
        assert all(torch.equal(a, b) for a, b in zip(before, after, strict=True))
    assert verification.passed and verification.snr_db > 20, verification
    rows = [r.source_op for r in compiled.records]
    assert not [op for op in rows if op.split(".")[-1].endswith("_")], rows  # no in-place row
    assert not [op for op in rows if "_." in op], rows
    removed = {"aten.alias", "aten.clone", "aten.contiguous", "aten.detach", "aten.type_as"}
    assert not [op for op in rows if op in removed or op.startswith("aten.to.")], rows


# -- refusals, from the command line -------------------------------------------------------

REFUSED_SOURCE = """
import torch
from torch import nn


class InputMutation(nn.Module):
    def forward(self, x):
        y = x * 3
        x.relu_()  # mutates the input
        return x * 2 + y


class InputWriteOnly(nn.Module):
    def forward(self, x, out):
        out.copy_(x)  # writes the input
        return x * 2


class BufferMutation(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("total", torch.zeros(1, 2, 4, 4))

    def forward(self, x):
        self.total.add_(x)  # mutates the buffer
        return self.total * 2


class ViewMutation(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(2, 4, 1)

    def forward(self, x):
        y = self.conv(x)
        y[:, :2].relu_()  # mutates through a view
        return y


def input_mutation():
    return InputMutation().eval(), (torch.randn(1, 2, 4, 4),)


def input_write_only():
    return InputWriteOnly().eval(), (torch.randn(1, 2, 4, 4), torch.randn(1, 2, 4, 4))


def buffer_mutation():
    return BufferMutation().eval(), (torch.randn(1, 2, 4, 4),)


def view_mutation():
    return ViewMutation().eval(), (torch.randn(1, 2, 4, 4),)


class FirstLayerInPlace(nn.Module):
    def __init__(self):
        super().__init__()
        self.relu = nn.ReLU(inplace=True)
        self.conv = nn.Conv2d(2, 4, 1)

    def forward(self, x):
        return self.conv(self.relu(x))  # writes the input: nothing else reads it


def first_layer_in_place():
    return FirstLayerInPlace().eval(), (torch.randn(1, 2, 4, 4),)
"""


@pytest.mark.parametrize(
    ("factory", "marker", "op", "words"),
    [
        (
            "input_mutation",
            "mutates the input",
            "aten.relu_",
            ["model input x, whose value before the write is read too", "x + 1"],
        ),
        (
            "input_write_only",
            "writes the input",
            "aten.copy_",
            ["model input out and nothing reads the result", "x + 1"],
        ),
        (
            "buffer_mutation",
            "mutates the buffer",
            "aten.add_.Tensor",
            ["buffer total", "keep state out of forward()"],
        ),
        ("view_mutation", "mutates through a view", "aten.relu_", ["another view", "x + 1"]),
    ],
)
def test_mutation_is_a_one_line_refusal(
    capsys, tmp_path, factory: str, marker: str, op: str, words: list[str]
) -> None:
    path = tmp_path / "mutating.py"
    path.write_text(REFUSED_SOURCE)
    result = run(capsys, f"{path}:{factory}", "-o", tmp_path / "m.pte")
    line = error_line(result)
    number = next(i for i, text in enumerate(REFUSED_SOURCE.splitlines(), 1) if marker in text)
    assert f"error: {op} at {path}:{number} in model (" in line, line
    assert "rewrite: " in line and all(word in line for word in words), line
    assert "Traceback" not in result.err
    assert not (tmp_path / "m.pte").exists()


def test_a_write_into_the_model_input_compiles_with_a_note(capsys, tmp_path) -> None:
    path = tmp_path / "mutating.py"
    path.write_text(REFUSED_SOURCE)
    result = run(capsys, f"{path}:first_layer_in_place", "-o", tmp_path / "m.pte", "--verify")
    assert result.status == 0, result.err
    number = next(
        i for i, text in enumerate(REFUSED_SOURCE.splitlines(), 1) if "writes the input:" in text
    )
    notes = [line for line in result.out.splitlines() if line.startswith("note: ")]
    assert notes == [
        f"note: aten.relu_ at {path}:{number} in relu (ReLU) writes into the model input x: "
        "computed into a new tensor; the input keeps its value"
    ], result.out
    assert "verify" in result.out and ": PASS" in result.out
    assert (tmp_path / "m.pte").exists()
