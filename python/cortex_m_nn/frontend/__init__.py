"""Stage 1, frontend: what the user gives, made into a float graph the quantizer takes.

In: a model (an ``nn.Module`` with example inputs, a ``.pt2``, ``file.py:factory`` or a
built-in name) and calibration samples. Out: the exported float graph in functional form.

* ``model_spec``, ``model_source``: read the model argument and load the model (``models``:
  the built-in ones);
* ``calibration``: the calibration samples;
* ``functional``, ``equivalents``: in-place operators made functional, operators without a
  rule made exactly equivalent ones;
* ``states``: the states an SVDF layer keeps between inferences, in each form.
"""
