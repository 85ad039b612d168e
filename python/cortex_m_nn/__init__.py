"""cortex-m-nn: PyTorch models to CMSIS-NN operators on Arm Cortex-M, as ExecuTorch programs."""

import logging

__version__ = "0.1.0"

# torchao logs a failure for each optional CUDA extension it cannot load on a CPU-only
# machine, and torch's pytree warns about a torchao enum: neither concerns Cortex-M users.
logging.getLogger("torchao").setLevel(logging.CRITICAL)
logging.getLogger("torch.utils._pytree").setLevel(logging.ERROR)
