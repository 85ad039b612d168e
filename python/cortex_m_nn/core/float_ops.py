"""Float ops the compiler rewrites a model's layer into before quantization (namespace
``cortex_m_nn_float``, which ``cortex_m_nn.nn``'s SVDF steps share): the quantizer annotates
them, a rule lowers them, none reaches a ``.pte``. Defined here, below everything that names
them; the implementation lives with the rewrite (``quantize/recurrent.py`` for ``lstm``,
``quantize/gru.py`` for ``gru``)."""

from __future__ import annotations

import torch

LIB = torch.library.Library("cortex_m_nn_float", "FRAGMENT")
LIB.define(
    "lstm(Tensor input, Tensor? hidden, Tensor? cell, Tensor input_weight, Tensor hidden_weight,"
    " Tensor? input_bias, Tensor? hidden_bias, bool batch_first, int cell_scale_power,"
    " float input_scale, float hidden_scale, int hidden_zero_point, int hidden_bits) -> Tensor"
)


def _lstm_fake(x, h, c, wx, wh, *args):  # noqa: ANN001, ANN002, ANN202
    return x.new_empty((*x.shape[:-1], wh.shape[1]))


torch.library.register_fake("cortex_m_nn_float::lstm", _lstm_fake, lib=LIB)
#: One ``nn.LSTM`` layer (``quantize/recurrent.py``).
LSTM = torch.ops.cortex_m_nn_float.lstm.default

LIB.define(
    "lstm_cell(Tensor input, Tensor? hidden, Tensor? cell, Tensor input_weight,"
    " Tensor hidden_weight, Tensor? input_bias, Tensor? hidden_bias, bool batch_first,"
    " int cell_scale_power, float input_scale, float hidden_scale, int hidden_zero_point,"
    " int hidden_bits) -> Tensor"
)


def _cell_fake(x, h, c, wx, wh, bx, bh, batch_first, *args):  # noqa: ANN001, ANN002, ANN202
    return x.new_empty((x.shape[0 if batch_first else 1], wh.shape[1]))


torch.library.register_fake("cortex_m_nn_float::lstm_cell", _cell_fake, lib=LIB)
#: The final cell state ``[B, H]`` of the :data:`LSTM` layer with the same arguments: what a
#: streaming LSTM (``nn.Streaming``) keeps for its next call.
LSTM_CELL = torch.ops.cortex_m_nn_float.lstm_cell.default

LIB.define(
    "gru(Tensor input, Tensor? hidden, Tensor input_weight, Tensor hidden_weight,"
    " Tensor? input_bias, Tensor? hidden_bias, bool batch_first, float input_scale,"
    " float hidden_scale, int hidden_zero_point, int hidden_bits) -> Tensor"
)


def _gru_fake(x, h, wx, wh, *args):  # noqa: ANN001, ANN002, ANN202
    return x.new_empty((*x.shape[:-1], wh.shape[1]))


torch.library.register_fake("cortex_m_nn_float::gru", _gru_fake, lib=LIB)
#: One ``nn.GRU`` layer (``quantize/gru.py``).
GRU = torch.ops.cortex_m_nn_float.gru.default

LIB.define("masked_softmax(Tensor input, Tensor keep) -> Tensor")


def _masked_softmax(x, keep):  # noqa: ANN001, ANN202
    """Softmax over the last dim of the kept entries; a masked one weighs exactly 0 (as
    ``-inf`` added in float does). ``keep`` is boolean, broadcast to ``x``."""
    return x.masked_fill(~keep, float("-inf")).softmax(-1)


LIB.impl("masked_softmax", _masked_softmax, "CompositeExplicitAutograd")
torch.library.register_fake(
    "cortex_m_nn_float::masked_softmax", lambda x, keep: torch.empty_like(x), lib=LIB
)
#: Attention's softmax under a boolean or causal mask (``frontend/decompose.py``).
MASKED_SOFTMAX = torch.ops.cortex_m_nn_float.masked_softmax.default

LIB.define("softsign(Tensor input) -> Tensor")
LIB.impl("softsign", lambda x: x / (x.abs() + 1), "CompositeExplicitAutograd")
torch.library.register_fake("cortex_m_nn_float::softsign", torch.empty_like, lib=LIB)
#: ``nn.Softsign``'s ``x / (|x| + 1)`` as one element-wise function, a table
#: (``frontend/equivalents.py``).
SOFTSIGN = torch.ops.cortex_m_nn_float.softsign.default
