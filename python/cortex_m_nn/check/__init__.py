"""Stage 6, check: does the program compute what the model computes?

In: a compiled program (``pipeline.CompiledProgram``) and samples. Out: numbers: the
lowered graph against the PT2E reference and the float model, the SNR of every quantized
activation, the program run by the kernels on the host, a firmware test vector.

* ``verify``: ``--verify``; ``layer_snr``: where the error enters;
* ``host_kernels``: the C++ kernels as a host library, in ExecuTorch's Python runtime;
* ``vector``: one input and its outputs, for a firmware test;
* ``harness``: the checks as a test harness for users' own models and operators.
"""
