"""PT2E quantization for CMSIS-NN: the quantizer and its quantization specs."""

from cortex_m_nn.quantizer.quantizer import CortexMQuantizer

__all__ = ["CortexMQuantizer"]
