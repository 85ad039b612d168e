"""Stage 5, serialize: the lowered graph as an ExecuTorch program, and the program read back.

In: the lowered graph and the program's inputs and outputs. Out: the ``.pte`` bytes.

* ``program_io``: the graph the program serialises (float or int8 inputs and outputs);
* ``execution_graph``, ``shared_values``: a fully lowered graph straight to the execution
  dialect, equal constants stored once; ``edge``: ``to_edge`` for the rest;
* ``pte``, ``pte_format``, ``io_spec``: a ``.pte`` read without ExecuTorch (operators,
  memory, metadata, inputs and outputs).
"""
