"""The command line: ``cortex-m-compile`` and ``west cortex-m-compile``, thin over
:mod:`cortex_m_nn.program`.

* ``main``: the compile command and its options;
* ``subcommands``: ``inspect`` and ``embed``;
* ``command``: what every command shares (one-line errors, exit codes, ``--debug``).
"""
