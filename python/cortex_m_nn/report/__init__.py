"""Stage 7, report: what the compile made, for people and for tools.

In: a compiled program and its checks. Out: the text report, its JSON document and
``--plot``'s picture of the memory plan.

* ``compile_report``: the table people read and the document tools read;
* ``plot``: tensor lifetimes against arena offsets.
"""
