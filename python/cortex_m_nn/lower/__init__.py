"""Stage 3, lower: a PT2E-quantized graph onto ``cortex_m_nn`` operators.

In: the PT2E-quantized graph and the target. Out: the lowered graph (each operator a
CMSIS-NN call, running its bit-exact reference when called) and the report's rows.

``passes`` lists the passes in order (``PASSES``) and runs them (``lower``). The modules,
each importing only those above it in this list:

* ``graph_values``: int8 values (``QValue``) and quantization facts of the graph;
* ``records``: the report's rows (``OpRecord``) and the result (``LoweringResult``);
* ``macs``: the multiply-accumulates of an operator left in fp32;
* ``context``: the graph being built and the state of one lowering (``LoweringContext``);
* ``registry``: ``Pattern``, ``Lowered``, ``rule()``, ``reads_through()``, ``RULES``;
* ``scratch``: each CMSIS-NN call's scratch buffer, from CMSIS-NN's own getters;
* ``layout``, ``binary``, ``convolution``, ``activation``, ``gather``: what rules share;
* ``rules``: one module per operator family (importing the package registers them all);
* ``patterns``, ``walk``, ``hygiene``: the passes before, during and after the walk.
"""
