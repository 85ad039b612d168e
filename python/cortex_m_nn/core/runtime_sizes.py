"""ExecuTorch's runtime structures on a 32-bit Cortex-M, as its method allocator takes them:
what ``serialize.pte.runtime_overhead`` counts from a ``.pte`` and ``plan.liveness`` estimates
from a graph."""

#: Sizes and alignments of ExecuTorch's runtime structures on a 32-bit Cortex-M, from its
#: headers: ``EValue`` an 8-byte payload and a tag (8-aligned), ``TensorImpl`` four pointers,
#: three sizes, dtype, shape dynamism and device, ``TensorMeta`` a dtype and a span, a span a
#: pointer and a size, ``Chain`` a pointer, a span and a pointer, ``BoxedEvalueList`` a span
#: and a pointer, ``PlatformMemoryAllocator`` a ``MemoryAllocator`` (vtable, three pointers,
#: size, profiler id) and a list head.
EVALUE_BYTES = 16
TENSOR_IMPL_BYTES = 32
TENSOR_META_BYTES = 12
POINTER_BYTES = 4
SPAN_BYTES = 8
CHAIN_BYTES = 16
BOXED_LIST_BYTES = 12
ARRAY_REF_BYTES = 8
PLATFORM_ALLOCATOR_BYTES = 28
#: (cortex-m-nn writes no delegates; a program with some is counted at this size each)
BACKEND_DELEGATE_BYTES = 32
#: What ``resolve_operator`` asks of a temporary allocator per kernel argument before it uses
#: it instead of the method allocator: a ``TensorMeta`` and ``kTensorDimensionLimit`` (16)
#: one-byte dim-order entries.
TEMP_BYTES_PER_ARGUMENT = TENSOR_META_BYTES + 16
