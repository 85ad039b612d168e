"""The shared vocabulary at the bottom of the package: what every stage names the same way.

* ``families``: the ATen and quantize/dequantize operators, by family;
* ``integers``: the integer ranges values take and the quantizations CMSIS-NN fixes;
* ``graph``: questions about an exported graph's node that several stages ask;
* ``refusals``, ``rewrites``: why an operator is not lowered, and the advice for each kind;
* ``target``, ``abi``, ``options``: the cores and ISAs, the kernel ABI a program and a kernel
  build agree on, the quantization options;
* ``operators``: ``ops/operators.yaml``, the operators' schemas, read;
* ``precision``: which operators compute in int16; ``cmsis_nn``: the dtype cases and the
  CMSIS-NN function each operator's kernel calls for each, and the paths a shape decides;
* ``float_ops``: the float operators a model's layers are rewritten into before quantization;
* ``errors``, ``outputs``: the user's errors, and outputs written all together or not at all.

It imports no other part of ``cortex_m_nn`` (a test proves it); the stages import it.
"""
