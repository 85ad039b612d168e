"""Per-layer precision searches: compile, measure, choose, compile again.

In: a model, calibration samples and a minimum output SNR. Out: the compiled program whose
layers take the cheapest precision that keeps the SNR.

* ``layers``: the search both share (``LayerSearch``: compile a layer set, measure it, the
  greedy steps, the smallest program measured; the plan the report reads);
* ``activations``: ``--precision auto``, int8 or int16 activations per layer;
* ``weights``: ``--weights auto``, int4 or int8 weights per layer.
"""
