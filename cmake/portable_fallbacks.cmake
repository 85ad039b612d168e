# cortex-m-nn: the model leaves operators to ExecuTorch's portable kernels (cortex-m-compile
# --allow-fallback). Included by cmake/zephyr_module.cmake; CORTEX_M_NN_MODEL_FALLBACK_OPERATORS
# lists them (from cortex-m-compile embed).
#
# ExecuTorch's Zephyr module registers its portable kernels all together (portable_ops_lib,
# linked into libexecutorch when CONFIG_EXECUTORCH_BUILD_PORTABLE_OPS=y; pytorch/executorch
# zephyr/CMakeLists.txt). Registering only the fallback operators would use ExecuTorch's
# selective build (tools/cmake/Codegen.cmake: gen_selected_ops, generate_bindings_for_kernels,
# gen_operators_lib) on portable_kernels, which its Zephyr module does not build without
# portable_ops_lib; that is not done here yet, so a model with fallbacks links every portable
# kernel. A fully lowered model needs none (and the build warns if they are linked anyway).

string(REPLACE ";" ", " _cmnn_fallbacks "${CORTEX_M_NN_MODEL_FALLBACK_OPERATORS}")
if(NOT CONFIG_EXECUTORCH_BUILD_PORTABLE_OPS)
  message(FATAL_ERROR
    "cortex-m-nn: the model leaves ${_cmnn_fallbacks} to ExecuTorch's portable kernels: set "
    "CONFIG_EXECUTORCH=y and CONFIG_EXECUTORCH_BUILD_PORTABLE_OPS=y (ExecuTorch's Zephyr module "
    "then builds the runtime and registers them; its code generation needs torch), or lower "
    "them (compile without --allow-fallback to see why they were not)")
endif()
message(STATUS
  "cortex-m-nn: ${_cmnn_fallbacks} run on ExecuTorch's portable kernels "
  "(CONFIG_EXECUTORCH_BUILD_PORTABLE_OPS=y registers all of them)")

# Twister builds with warnings as errors, and ExecuTorch's Zephyr CMake gives its targets
# Zephyr's compile options (pytorch/executorch zephyr/CMakeLists.txt,
# fix_executorch_target_flags). ExecuTorch's portable kernels warn under them: of its 192
# kernels/portable/cpu sources, compiled for Cortex-M55 with arm-none-eabi-g++ and Zephyr's
# warning flags, 76 warn: -Wdouble-promotion (float math in double), -Wdeprecated-declarations
# (ExecuTorch's own deprecated aliases), -Wint-in-bool-context (op_prod) and -Wformat (an
# int32_t printed with %d in op_repeat_interleave; long on ARM). Those stay warnings, not
# errors, for these targets only; our kernels and the rest of the image keep -Werror.
foreach(_cmnn_portable portable_kernels portable_ops_lib)
  if(TARGET ${_cmnn_portable})
    set_property(TARGET ${_cmnn_portable} APPEND PROPERTY COMPILE_OPTIONS
                 -Wno-error=double-promotion -Wno-error=deprecated-declarations
                 -Wno-error=int-in-bool-context -Wno-error=format)
  endif()
endforeach()
