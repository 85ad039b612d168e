"""Stage 4, plan: the memory of one core, ahead of time.

In: the program's graph in the execution dialect (and a board's memories). Out: the memory
plan (each planned tensor's lifetime and arena offset, the live-tensor bound, the constants)
and whether the model fits the board.

* ``placement``: the planning algorithms ExecuTorch's memory planning pass runs;
* ``overlap``: where an output may take its dead input's bytes (the ``small`` schedule);
* ``patch`` (with ``stage``, ``strips`` and ``liveness``): the first layers run a few rows at
  a time (the ``small`` schedule), chosen by the live-tensor bound of the lowered graph;
* ``memory_plan``: the plan read back (lifetimes, the layer-by-layer bound) and checked;
* ``fit``, ``boards``: flash and RAM against a board's memories.

Scratch buffers are sized where the lowering chooses the CMSIS-NN call (``lower.scratch``).
"""
