"""MLPerf Tiny keyword-spotting DS-CNN (the "kws" reference model), written in PyTorch.

Architecture, from the MLPerf Tiny training reference
(``benchmark/training/keyword_spotting/keras_model.py``, ``ds_cnn``), which is Arm's
"Hello Edge" DS-CNN small (arXiv:1711.07128):

======================  ===============  ============  =========  ==========
layer                   kernel / stride  output (CHW)  params     MACs
======================  ===============  ============  =========  ==========
input (MFCC)                             1×49×10
conv + ReLU             10×4 / 2         64×25×5       2,624      320,000
4 × depthwise + ReLU    3×3 / 1          64×25×5       640        72,000
4 × pointwise + ReLU    1×1 / 1          64×25×5       4,160      512,000
avg pool                24×5 / 24×5      64×1×1        0          (7,680 adds)
flatten, linear         64 → 12          12            780        768
softmax                                  12            0
======================  ===============  ============  =========  ==========

Total 22,604 parameters and 2,656,768 multiply-accumulates. The Keras model reports
23,756 trainable parameters: the same layers plus the γ/β of its nine BatchNorms
(9 × 2 × 64 = 1,152), which here are folded into the convolutions' weights and biases.

Deliberate differences from the Keras model, all documented:

* **BatchNorm folded.** Each Conv2D + BatchNorm pair is one ``Conv2d(bias=True)``, as
  after inference-time folding. The weights are random (seeded), not trained; BN folding
  under PT2E is a separate concern from this model's job (a fixed, realistic graph).
* **First-conv padding** is Keras's: ``padding="same"`` with a 10×4 kernel and stride 2 on
  49×10 pads rows 4 above / 5 below and columns 1 / 1, giving 25×5. ``nn.Conv2d`` only pads
  symmetrically, so the model pads with ``nn.ZeroPad2d((1, 1, 4, 5))`` and convolves with
  ``padding=0``; the compiler folds that pad into the convolution (one CMSIS-NN call, as
  TFLite Micro runs it), and trained Keras weights load as they are.
* **Pooling is not global.** As in the reference code, the pool is ``(49 // 2, 10 // 2)`` =
  24×5 over a 25×5 map with stride = kernel, so the last time row is dropped. Kept as
  published. (The trained reference ``kws_ref_model.tflite`` pools all 25 rows; the
  benchmark that loads its weights, ``benchmarks/mlperf_weights.py``, uses its window.)
* **Dropout** (0.2 after the first conv, 0.4 before the pool) is kept; it is the
  identity in ``eval()`` mode, which the factory returns.
"""

from __future__ import annotations

import torch
from torch import nn

#: Output labels in the MLPerf Tiny order (``get_dataset.py`` ``word_labels``, i.e. the
#: TFDS ``speech_commands`` class order: ten words alphabetically, then silence, unknown).
CLASSES: tuple[str, ...] = (
    "down", "go", "left", "no", "off", "on", "right", "stop", "up", "yes",
    "silence", "unknown",
)  # fmt: skip

INPUT_SHAPE: tuple[int, int, int, int] = (1, 1, 49, 10)  # N, C, H (MFCC frames), W (coeffs)
FILTERS = 64
BLOCKS = 4
SEED = 0


class DSCNN(nn.Module):
    """DS-CNN small for keyword spotting: 1×1×49×10 MFCCs → 12 class probabilities."""

    def __init__(self, num_classes: int = len(CLASSES), filters: int = FILTERS) -> None:
        super().__init__()
        self.classes = list(CLASSES) if num_classes == len(CLASSES) else None
        self.pad = nn.ZeroPad2d((1, 1, 4, 5))  # Keras's SAME: 4 rows above, 5 below
        self.conv = nn.Conv2d(1, filters, kernel_size=(10, 4), stride=(2, 2))
        self.dropout1 = nn.Dropout(0.2)
        layers: list[nn.Module] = []
        for _ in range(BLOCKS):
            layers += [
                nn.Conv2d(filters, filters, kernel_size=3, padding=1, groups=filters),
                nn.ReLU(),
                nn.Conv2d(filters, filters, kernel_size=1),
                nn.ReLU(),
            ]
        self.blocks = nn.Sequential(*layers)
        self.dropout2 = nn.Dropout(0.4)
        self.pool = nn.AvgPool2d(kernel_size=(INPUT_SHAPE[2] // 2, INPUT_SHAPE[3] // 2))
        self.fc = nn.Linear(filters, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.dropout1(torch.relu(self.conv(self.pad(x))))
        x = self.dropout2(self.blocks(x))
        x = torch.flatten(self.pool(x), 1)
        return torch.softmax(self.fc(x), dim=1)


def _init_weights(model: DSCNN) -> None:
    """He-uniform weights (variance-preserving through ReLU) and small biases.

    PyTorch's default init shrinks activations ~2.4× per ReLU layer; over nine layers
    that would leave the classifier seeing almost nothing but biases, which is not what a
    trained network's activations look like to a quantizer.
    """
    for module in model.modules():
        if isinstance(module, nn.Conv2d | nn.Linear):
            gain = "relu" if isinstance(module, nn.Conv2d) else "linear"
            nn.init.kaiming_uniform_(module.weight, nonlinearity=gain)
            nn.init.uniform_(module.bias, -0.1, 0.1)


def ds_cnn() -> tuple[torch.nn.Module, tuple[torch.Tensor, ...]]:
    """Build the DS-CNN in eval mode with deterministic weights, plus an example input.

    Weights and the example input depend only on ``SEED``; the caller's global RNG state
    is left untouched.
    """
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(SEED)
        model = DSCNN()
        _init_weights(model)
        example = torch.randn(INPUT_SHAPE)
    return model.eval(), (example,)
