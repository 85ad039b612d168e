"""Quantization-aware training on our quantizer: PT2E QAT with the specs of post-training
quantization, each observer replaced by a fake quantizer over a moving range.

``prepare`` takes the float graph in functional form (what ``pipeline.quantize`` exports) and
returns a trainable graph: batch norms folded into their convolutions as the lowering folds them
(so training adjusts the weights the device runs), then ``prepare_qat_pt2e`` with
``CortexMQuantizer(options, qat=True)``: every pattern the lowering takes is annotated as for
post-training quantization, and each spec's observer becomes a ``FakeQuantize``:

* weights: per channel (or per tensor) over the current weights' min and max, symmetric in
  [-127, 127] (int4: [-7, 7]), as the post-training observers choose them;
* activations: asymmetric int8 (or symmetric int16) over a moving average of each batch's min
  and max;
* biases, shared ranges and fixed ranges (softmax's output, an LSTM's cell state) stay what
  they are: derived from the fake quantizers, shared, fixed.

``convert`` turns a trained graph into the converted PT2E graph the lowering takes, with the
ranges the fake quantizers hold: nothing is calibrated again. The graph carries ``QAT_MARK`` in
its ``meta`` (the options it was prepared with), which is how ``cortex_m_nn.compile`` knows it.
"""

from __future__ import annotations

import copy

import torch
from torch.fx import GraphModule
from torchao.quantization.pt2e import (
    FakeQuantizeBase,
    disable_observer,
    move_exported_model_to_eval,
)
from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_qat_pt2e

from cortex_m_nn.core.errors import CompileError
from cortex_m_nn.core.options import QAT_MARK, QuantizationOptions
from cortex_m_nn.quantize.gru import GRU
from cortex_m_nn.quantize.quantizer import CortexMQuantizer
from cortex_m_nn.quantize.recurrent import LSTM, LSTM_CELL

#: The options whose choices the fake quantizers hold (precisions per layer); the others
#: (range method, equalization, bias correction) act on post-training calibration only.
FIXED_BY_TRAINING = (
    "activations", "int16_layers", "weights", "int4_layers", "linear_weights", "int4_ranges",
)  # fmt: skip


def prepare(exported: GraphModule, options: QuantizationOptions) -> GraphModule:
    """The trainable graph of ``exported`` (functional form, batch norms already folded).
    Recurrent layers are refused: their internal scales are chosen after conversion from
    calibration samples (``quantize.recurrent``), which training would not see."""
    recurrent = [n for n in exported.graph.nodes if n.target in (LSTM, LSTM_CELL, GRU)]
    if recurrent:
        raise CompileError(
            f"prepare_qat does not train recurrent layers yet ({recurrent[0].name}: "
            "an LSTM or GRU, whose internal scales are calibrated after conversion): compile "
            "the float model with post-training quantization"
        )
    prepared = prepare_qat_pt2e(exported, CortexMQuantizer(options, qat=True))
    prepared.meta[QAT_MARK] = options.as_dict()
    return prepared


def check_options(trained: GraphModule, options: QuantizationOptions) -> None:
    """The options of the compile are the ones the graph was prepared with: its fake
    quantizers fixed the precisions and ranges."""
    prepared = trained.meta[QAT_MARK]
    asked = options.as_dict()
    differ = sorted(k for k in FIXED_BY_TRAINING if prepared.get(k) != asked.get(k))
    if differ:
        values = ", ".join(f"{k}={prepared[k]!r}" for k in differ)
        raise CompileError(
            f"the model was prepared for training with {values}: compile it with the same "
            "quantization options (or prepare it again with these)"
        )


def convert(
    trained: GraphModule, example_inputs: tuple[torch.Tensor, ...]
) -> tuple[GraphModule, GraphModule]:
    """(the trained graph computing in float — its fake quantizers off — for the report's
    per-layer SNR, the converted PT2E graph with the fake quantizers' ranges), each exported
    again for ``example_inputs`` (training's graph takes batches of any size; the program takes
    these). ``trained`` is not changed."""
    reference = _without_fake_quantizers(move_exported_model_to_eval(copy.deepcopy(trained)))
    frozen = move_exported_model_to_eval(copy.deepcopy(trained))
    frozen.apply(disable_observer)  # the ranges training left, as they are
    converted = convert_pt2e(frozen)
    return _exported(reference, example_inputs), _exported(converted, example_inputs)


def _without_fake_quantizers(graph: GraphModule) -> GraphModule:
    """``graph`` with its fake quantizers taken out: the trained model in float."""
    for node in list(graph.graph.nodes):
        if node.op == "call_module" and isinstance(
            graph.get_submodule(str(node.target)), FakeQuantizeBase
        ):
            node.replace_all_uses_with(node.args[0])
            graph.graph.erase_node(node)
            graph.delete_submodule(str(node.target))
    graph.graph.lint()
    graph.recompile()
    return graph


def _exported(graph: GraphModule, example_inputs: tuple[torch.Tensor, ...]) -> GraphModule:
    """``graph`` traced again with the shapes of ``example_inputs``."""
    return torch.export.export(graph, example_inputs).module()
