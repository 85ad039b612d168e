"""A model zoo that must lower completely: MLPerf Tiny and common embedded architectures.

Every factory takes no arguments and returns ``(module in eval mode, example_inputs)`` with
seeded random weights, written here (nothing is downloaded). ``ZOO`` maps a name to its
factory; ``MAY_FALL_BACK`` names, per model, the only source operators allowed to stay in
float (the report then lists them as FALLBACK).
"""

from __future__ import annotations

from collections.abc import Callable

from cortex_m_nn.frontend.models import ds_cnn

from .audio1d import audio1d
from .autoencoder import autoencoder
from .common import Example
from .kws_gru import kws_gru, kws_gru_streaming
from .kws_lstm import kws_lstm, kws_lstm_streaming
from .kws_transformer import kws_transformer
from .mobilenet import mobilenet_v1, mobilenet_v2, mobilenet_v3_small
from .resnet import resnet8
from .svdf_kws import svdf_kws
from .transformer import transformer
from .unet import unet

ZOO: dict[str, Callable[[], Example]] = {
    "ds_cnn": ds_cnn,
    "resnet8": resnet8,
    "mobilenet_v1_025": mobilenet_v1,
    "autoencoder": autoencoder,
    "mobilenet_v2_035": mobilenet_v2,
    "mobilenet_v3_small_05": mobilenet_v3_small,
    "transformer": transformer,
    "audio1d": audio1d,
    "unet": unet,
    "kws_lstm": kws_lstm,
    "kws_lstm_streaming": kws_lstm_streaming,
    "svdf_kws": svdf_kws,
    "kws_gru": kws_gru,
    "kws_gru_streaming": kws_gru_streaming,
    "kws_transformer": kws_transformer,
}

#: model → source operators (report names) that may stay in float; none for the others.
MAY_FALL_BACK: dict[str, set[str]] = {}

__all__ = ["MAY_FALL_BACK", "ZOO"]
