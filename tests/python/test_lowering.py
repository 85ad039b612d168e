"""The lowered graph: complete lowering in NCHW and channels_last, layout only at the boundary,
numerics within 1 LSB of the PT2E reference per operator."""

from __future__ import annotations

import pytest
import torch

from cortex_m_nn.check.harness import check_dialect, count_operators
from cortex_m_nn.check.verify import verify
from cortex_m_nn.core.errors import CompileError
from cortex_m_nn.core.target import Target
from cortex_m_nn.frontend.calibration import Calibration
from cortex_m_nn.frontend.models import ds_cnn
from cortex_m_nn.lower.graph_values import NCHW_TO_NHWC
from cortex_m_nn.ops.arithmetic import Rounding

from .models import ConvOutput, SharedConv, conv_stack, pools, seeded, with_rms_norm


def channels_last(module, inputs):
    return module.to(memory_format=torch.channels_last), tuple(
        x.to(memory_format=torch.channels_last) for x in inputs
    )


def only_cortex_m_nn_and_views(compiled) -> None:
    for name in count_operators(compiled.lowered):
        assert name.startswith("cortex_m_nn.") or name == "aten.view", name


def layout_changes(compiled) -> list[tuple[str, list[int]]]:
    """(operator, permutation) of every node that changes the layout."""
    found = []
    for node in compiled.lowered.graph.nodes:
        name = str(node.target)
        if "permute" in name or "transpose" in name:
            found.append((name, []))
        if "cortex_m_nn.quantize" in name or "cortex_m_nn.dequantize" in name:
            if node.args[3]:
                found.append((name, list(node.args[3])))
    return found


@pytest.mark.parametrize("memory_format", ["nchw", "channels_last"])
def test_ds_cnn_lowers_completely(memory_format: str) -> None:
    module, inputs = ds_cnn()
    if memory_format == "channels_last":
        module, inputs = channels_last(module, inputs)
    compiled, verification = check_dialect(
        module,
        inputs,
        before={"aten.conv2d": 9, "aten.linear": 1, "aten.softmax.int": 1},
        after={
            "cortex_m_nn.conv2d": 5,
            "cortex_m_nn.depthwise_conv2d": 4,
            "cortex_m_nn.linear": 1,
            "cortex_m_nn.avg_pool2d": 1,
            "cortex_m_nn.softmax": 1,
            "aten.conv2d": 0,
            "aten.linear": 0,
        },
    )
    assert not [r for r in compiled.records if not r.lowered]
    only_cortex_m_nn_and_views(compiled)
    assert layout_changes(compiled) == [
        ("cortex_m_nn.quantize.default", NCHW_TO_NHWC),
    ]  # the output is [1, 12]: no permutation on the way out
    assert verification.max_lsb <= 1
    assert verification.snr_db > 20


def test_nchw_and_channels_last_give_the_same_program() -> None:
    module, inputs = conv_stack()
    nchw, _ = check_dialect(module, inputs)
    last, _ = check_dialect(*channels_last(*conv_stack()))
    assert count_operators(nchw.lowered) == count_operators(last.lowered)
    assert [(r.source_op, r.kernel) for r in nchw.records] == [
        (r.source_op, r.kernel) for r in last.records
    ]
    # Same program shape; calibration ranges may differ in the last float bits because
    # channels_last float convolutions sum in a different order.
    assert len(nchw.pte) == len(last.pte)
    assert nchw.arena_bytes == last.arena_bytes


def test_conv_stack_every_rule() -> None:
    module, inputs = conv_stack()
    compiled, _ = check_dialect(
        module,
        inputs,
        after={
            "cortex_m_nn.conv2d": 2,
            "cortex_m_nn.depthwise_conv2d": 1,
            "cortex_m_nn.add": 1,
            "cortex_m_nn.avg_pool2d": 2,
            "cortex_m_nn.linear": 1,
            "cortex_m_nn.softmax": 1,
        },
    )
    only_cortex_m_nn_and_views(compiled)


def test_pools_and_views() -> None:
    module, inputs = pools()
    compiled, _ = check_dialect(
        module,
        inputs,
        after={"cortex_m_nn.avg_pool2d": 2, "cortex_m_nn.add": 1, "cortex_m_nn.linear": 1},
    )
    only_cortex_m_nn_and_views(compiled)
    # Two outputs: the linear's [1, 3] and b.squeeze() of a 1x1 map: both layout-free.
    assert [p for _, p in layout_changes(compiled)] == [NCHW_TO_NHWC]


def test_fused_activation_ranges() -> None:
    module, inputs = conv_stack()
    compiled, _ = check_dialect(module, inputs)
    ranges = {
        str(n.target): n.args[-4:-2]  # activation_min, activation_max, path, scratch_bytes
        for n in compiled.lowered.graph.nodes
        if "cortex_m_nn.conv2d" in str(n.target) or "depthwise" in str(n.target)
    }
    # relu and relu6 outputs are clamped below at the zero point (the quantizer puts the
    # output range at [0, max], so the zero point is -128) and relu6 above at 6.0.
    assert all(low == -128 for low, _ in ranges.values())


def test_unsupported_op_is_an_error_naming_op_and_line() -> None:
    module, inputs = with_rms_norm()
    with pytest.raises(CompileError) as error:
        check_dialect(module, inputs)
    message = str(error.value)
    assert "aten.rms_norm" in message and "norm (RMSNorm)" in message
    assert "--allow-fallback" in message and "\n" not in message


def test_allow_fallback_keeps_fp32_and_reports_it() -> None:
    module, inputs = with_rms_norm()
    compiled, _ = check_dialect(
        module, inputs, allow_fallback=True, after={"aten.rms_norm": 1, "cortex_m_nn.conv2d": 1}
    )
    fallbacks = [r for r in compiled.records if not r.lowered]
    assert [r.source_op for r in fallbacks] == ["aten.rms_norm"]
    assert "dequantize" in {r.source_op for r in compiled.records}


@pytest.mark.parametrize(
    "target", ["cortex-m55", "cortex-m33", "cortex-m0plus", "cortex-m55+scalar"]
)
def test_scratch_sizes_follow_the_target(target: str) -> None:
    module, inputs = conv_stack()
    compiled, _ = check_dialect(module, inputs, target=Target.parse(target))
    assert compiled.arena_bytes > 0


def test_verification_catches_a_wrong_operator() -> None:
    module, inputs = conv_stack()
    compiled, _ = check_dialect(module, inputs)
    from cortex_m_nn.check.verify import verify
    from cortex_m_nn.frontend.calibration import synthetic

    lowering = compiled.stages.lowering
    conv = next(
        n
        for n in lowering.graph_module.graph.nodes
        if n.op == "call_function" and "cortex_m_nn.conv2d" in str(n.target)
    )
    bias = getattr(lowering.graph_module, conv.args[2].target)
    bias += 1000  # corrupt one operator's constant
    result = verify(lowering, compiled.stages.quantized, module, synthetic(inputs, 4).samples)
    assert not result.passed and result.max_lsb > 1


@pytest.mark.parametrize("rounding", list(Rounding))
def test_both_cmsis_nn_roundings_verify(rounding: Rounding) -> None:
    module, inputs = conv_stack()
    compiled, verification = check_dialect(module, inputs, rounding=rounding)
    assert compiled.rounding is rounding and verification.passed


def test_shared_layer_rescales_its_bias_per_call() -> None:
    """The second call's inputs are 8x larger: its bias must be rescaled, not reused."""
    generator = torch.Generator().manual_seed(1)
    samples = [
        (
            torch.randn(1, 3, 4, 4, generator=generator),
            8 * torch.randn(1, 3, 4, 4, generator=generator),
        )
        for _ in range(8)
    ]
    module, _ = seeded(SharedConv, 1)
    calibration = Calibration(samples, "x and 8x", synthetic=False)
    _, verification = check_dialect(module, samples[0], calibration=calibration)
    assert verification.max_lsb <= 1


def test_verification_checks_the_output_layout() -> None:
    module, inputs = seeded(ConvOutput, 1, 3, 6, 6)
    compiled, _ = check_dialect(module, inputs)
    lowering = compiled.stages.lowering
    (dequantize,) = [
        n for n in lowering.graph_module.graph.nodes if "cortex_m_nn.dequantize" in str(n.target)
    ]
    dequantize.update_arg(3, [0, 3, 2, 1])  # H and W swapped: same shape, wrong values
    lowering.graph_module.recompile()
    result = verify(lowering, compiled.stages.quantized, module, [inputs])
    assert not result.passed
