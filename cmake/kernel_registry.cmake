# ExecuTorch's kernel registry sized to the kernels an image registers.
#
# ExecuTorch keeps every registered kernel in one static table (runtime/kernel/
# operator_registry.cpp) of MAX_KERNEL_NUM entries, 2000 unless defined: 24,000 B of RAM on a
# 32-bit core (12 B per entry), where a cortex-m-nn image registers a few dozen. Used by the
# Zephyr module (cmake/zephyr_module.cmake) and the bare-metal runner (tests/target/runner).
#
#   cortex_m_nn_kernel_registry_size(<out> KERNELS <our kernels> [PRIM_OPS <register_prim_ops.cpp>]
#                                    [EXTRA <n>])
#
# <out>: the number of kernels registered: one per cortex_m_nn operator in KERNELS, every
# primitive operator ExecuTorch's PRIM_OPS source registers when given (it registers them all,
# counted from the source), plus EXTRA (kernels the application registers itself).
#
#   cortex_m_nn_kernel_registry(<executable> <size>)
#
# Compiles ExecuTorch's registry (EXECUTORCH_KERNEL_REGISTRY_SOURCE, from
# cmake/executorch_runtime.cmake) into <executable> with room for <size> kernels.
function(cortex_m_nn_kernel_registry_size out)
  cmake_parse_arguments(A "" "PRIM_OPS;EXTRA" "KERNELS" ${ARGN})
  list(LENGTH A_KERNELS count)
  if(A_PRIM_OPS)
    if(NOT EXISTS "${A_PRIM_OPS}")
      message(FATAL_ERROR "cortex-m-nn: ${A_PRIM_OPS} not found: cannot count the primitive "
                          "operators ExecuTorch registers")
    endif()
    file(READ "${A_PRIM_OPS}" source)
    string(REGEX MATCHALL "Kernel\\([ \t\r\n]*\"" registered "${source}")
    list(LENGTH registered prims)
    if(prims EQUAL 0)
      message(FATAL_ERROR "cortex-m-nn: no Kernel(\"…\") entries in ${A_PRIM_OPS}: cannot count "
                          "the primitive operators ExecuTorch registers")
    endif()
    math(EXPR count "${count} + ${prims}")
  endif()
  if(A_EXTRA)
    math(EXPR count "${count} + ${A_EXTRA}")
  endif()
  if(count EQUAL 0)
    set(count 1)  # a zero-length table does not compile
  endif()
  set(${out} ${count} PARENT_SCOPE)
endfunction()

function(cortex_m_nn_kernel_registry executable size)
  add_library(${executable}_registry OBJECT "${EXECUTORCH_KERNEL_REGISTRY_SOURCE}")
  target_link_libraries(${executable}_registry PRIVATE executorch_core)
  target_compile_definitions(${executable}_registry PRIVATE MAX_KERNEL_NUM=${size})
  target_compile_options(${executable}_registry PRIVATE -fno-exceptions -fno-rtti -Wno-psabi)
  target_sources(${executable} PRIVATE $<TARGET_OBJECTS:${executable}_registry>)
endfunction()
