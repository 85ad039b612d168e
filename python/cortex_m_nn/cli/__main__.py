"""``python -m cortex_m_nn.cli``: the ``cortex-m-compile`` command."""

import sys

from cortex_m_nn.cli.main import main

sys.exit(main())
