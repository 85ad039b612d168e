"""cortex-m-nn: PyTorch models to CMSIS-NN operators on Arm Cortex-M, as ExecuTorch programs.

The front door is :func:`compile` (``cortex_m_nn.program``)::

    program = cortex_m_nn.compile(model, example_inputs, target="cortex-m55")
    program.save("model.pte")

The modules below it (the pipeline's stages) stay importable, but are not the front door.
"""

import logging

from cortex_m_nn.version import __version__

# torchao logs a failure for each optional CUDA extension it cannot load on a CPU-only
# machine, and torch's pytree warns about a torchao enum: neither concerns Cortex-M users.
logging.getLogger("torchao").setLevel(logging.CRITICAL)
logging.getLogger("torch.utils._pytree").setLevel(logging.ERROR)

# The front door (imports no torch until it compiles).
from cortex_m_nn.program import Options, Program, Report, compile, prepare_qat  # noqa: E402

__all__ = ["Options", "Program", "Report", "compile", "prepare_qat", "__version__"]
