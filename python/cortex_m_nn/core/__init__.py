"""The shared vocabulary at the bottom of the package: what every stage names the same way.

* ``families``: the ATen and quantize/dequantize operators, by family;
* ``integers``: the integer ranges values take and the quantizations CMSIS-NN fixes;
* ``graph``: questions about an exported graph's node that several stages ask;
* ``refusals``: why an operator is not lowered (the kinds the advice table is keyed by).

It imports no other part of ``cortex_m_nn`` (a test proves it); the stages import it.
"""
