"""Graph passes: lower a PT2E-quantized graph onto ``cortex_m_nn`` operators.

``pipeline`` lists the passes in order (``PASSES``) and runs them (``lower``). The modules,
each importing only those above it in this list:

* ``refusals``: why a rule refuses (``Refusal``, ``LoweringRefused``);
* ``graph_values``: int8 values (``QValue``) and quantization facts of the graph;
* ``records``: the report's rows (``OpRecord``) and the result (``LoweringResult``);
* ``context``: the graph being built and the state of one lowering (``LoweringContext``);
* ``registry``: ``Pattern``, ``Lowered``, ``rule()``, ``reads_through()``, ``RULES``;
* ``layout``, ``binary``, ``convolution``, ``activation``: what several rules share;
* ``rules``: one module per operator family (importing the package registers them all);
* ``patterns``, ``walk``, ``hygiene``: the passes before, during and after the walk.

``functional`` runs before quantization, not in the lowering: the exported float graph in
functional form (``functional_form``, step 2 of ``cortex_m_nn.pipeline``).
"""
