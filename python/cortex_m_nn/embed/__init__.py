"""Stage 8, embed: what a firmware build needs to run a ``.pte``.

In: a ``.pte``. Out: C sources and CMake facts for the firmware, and after the build, what
the image spends its memory on.

* ``pte_source``: the program as a C array in its own section, with its planned sizes;
* ``prepared``: the kernel calls prepared ahead of time, as a C table;
* ``kernel_codegen``: the kernels' declarations and registration, from ``operators.yaml``
  (torch-free: the kernels' CMake runs it);
* ``firmware``: a built image's flash and RAM, by component.
"""
