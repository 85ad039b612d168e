"""How the quantizer calibrates: the choices a user (``cortex-m-compile``) or a benchmark makes.

One frozen value travels from the CLI through ``compile.quantize`` to the quantizer, so every
choice is recorded in one place (and in the report).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from enum import Enum


class RangeMethod(str, Enum):
    """How an activation's int8 range is chosen from its calibration values."""

    #: the observed minimum and maximum
    MINMAX = "minmax"
    #: the range with the least expected quantization error (rounding inside, clipping
    #: outside) over a histogram of the values
    MSE = "mse"
    #: from the 0.01th to the 99.99th percentile of the values (widened to include 0)
    PERCENTILE = "percentile"


class LinearWeights(str, Enum):
    """How a linear layer's int8 weights are scaled."""

    #: per output channel where that takes at least 3 dB off the weights' rounding noise
    #: (``quantizer.config.linear_weight_spec``), else per tensor
    AUTO = "auto"
    #: one scale (``arm_fully_connected_s8``)
    PER_TENSOR = "per-tensor"
    #: one scale per output channel (``arm_fully_connected_per_channel_s8``)
    PER_CHANNEL = "per-channel"


class Activations(str, Enum):
    """The precision of the quantized activations."""

    #: int8, asymmetric (CMSIS-NN's s8 kernels)
    INT8 = "int8"
    #: int16, symmetric with zero point 0 (CMSIS-NN's s16 kernels, 8-bit weights): every op
    #: whose lowering has an int16 case (``cortex_m_nn.core.precision``) computes in int16, the
    #: others in int8, with a requantization where the precision changes
    INT16 = "int16"


class Weights(str, Enum):
    """The precision of convolution, depthwise and linear weights."""

    #: int8, symmetric in [-127, 127] (CMSIS-NN's s8 kernels)
    INT8 = "int8"
    #: int4 per output channel, symmetric in [-7, 7], packed two per byte (CMSIS-NN's s4
    #: kernels, int8 activations) wherever a layer has an int4 case (``precision.int4_case``);
    #: the others keep int8 weights
    INT4 = "int4"


class Int4Ranges(str, Enum):
    """How an int4 weight channel's symmetric scale is chosen."""

    #: max |w| / 7: nothing clipped
    MAX = "max"
    #: the clipping ratio of max |w| with the least squared rounding and clipping error of
    #: the channel's own weights (``quantizer.observers.Int4MsePerChannelObserver``)
    MSE = "mse"


class IoType(str, Enum):
    """What the program's inputs and outputs hold (``cortex_m_nn.serialize.program_io``)."""

    #: float tensors in the model's layout, quantized and dequantized inside the program
    FLOAT = "float"
    #: int8 tensors the caller quantizes and dequantizes (no boundary kernels)
    INT8 = "int8"


#: ``meta`` key of a graph prepared for quantization-aware training (``quantize.qat``): the
#: ``QuantizationOptions`` it was prepared with, as ``as_dict`` gives them.
QAT_MARK = "cortex_m_nn_qat"


def prepared_for_training(module: object) -> bool:
    """Whether ``module`` is a graph ``cortex_m_nn.prepare_qat`` made (trained or not): it
    converts with the ranges training left, and cannot be switched with ``.eval()``."""
    return QAT_MARK in getattr(module, "meta", {})


@dataclass(frozen=True)
class QuantizationOptions:
    """The quantizer's choices; the defaults are the best measured (benchmarks/accuracy.py,
    four trained models against ExecuTorch's CortexMQuantizer, 4 folds, 1,797 held-back
    images, two seeds: MSE ranges with equalization lead the peer's output SNR by 1.3–1.9 dB
    on average and change the float model's top-1 class about as often as the peer; bias
    correction adds 0.1–0.4 dB but lost accuracy on two models in one seed, so it is an
    option)."""

    ranges: RangeMethod = RangeMethod.MSE
    #: cross-layer equalization of the float model (quantize/equalize.py)
    equalize: bool = True
    #: bias correction from the calibration samples (quantize/bias_correction.py)
    bias_correction: bool = False
    #: per-tensor or per-channel linear weights
    linear_weights: LinearWeights = LinearWeights.AUTO
    #: int8 or int16 activations
    activations: Activations = Activations.INT8
    #: with int8 activations, the ops (exported-graph node names) that compute in int16 all
    #: the same: the per-layer choice of ``--precision auto`` (``cortex_m_nn.search.activations``)
    int16_layers: tuple[str, ...] = ()
    #: int8 or int4 weights
    weights: Weights = Weights.INT8
    #: with int8 weights, the layers (exported-graph node names) whose weights are int4 all
    #: the same where they have an int4 case: the per-layer choice of ``--weights auto``
    #: (``cortex_m_nn.search.weights``)
    int4_layers: tuple[str, ...] = ()
    #: how int4 weight scales are chosen (max: MSE lost output SNR on most models measured,
    #: docs/int4.md)
    int4_ranges: Int4Ranges = Int4Ranges.MAX

    def as_dict(self) -> dict[str, object]:
        """JSON-ready: enums as their values."""
        return {
            k: v.value if isinstance(v, Enum) else list(v) if isinstance(v, tuple) else v
            for k, v in asdict(self).items()
        }
