"""Stage 2, quantize: PT2E quantization for CMSIS-NN.

In: the float graph in functional form and calibration samples. Out: the PT2E-quantized graph
(quantize/dequantize pairs around every annotated pattern), calibrated.

* ``quantizer``: ``CortexMQuantizer``, which annotates the patterns the lowering takes;
* ``config``, ``observers``: the quantization specs and the range observers;
* ``batch_norm``, ``equalize``, ``bias_correction``: float rewrites that help int8;
* ``decompose``, ``recurrent``, ``svdf``: layers quantized as their steps.
"""

from cortex_m_nn.quantize.quantizer import CortexMQuantizer

__all__ = ["CortexMQuantizer"]
