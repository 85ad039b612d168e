"""Graph passes: lower a PT2E-quantized graph onto ``cortex_m_nn`` operators."""
