# cortex-m-nn: ExecuTorch's runtime in a Zephyr image (step 6 of cmake/zephyr_module.cmake,
# which includes this file with the library cortex_m_nn current and the image's
# CORTEX_M_NN_IMAGE_* variables set: what the embedded model and the loaded programs call).
#
# Built here by default, from the workspace's ExecuTorch checkout with the source list and the
# file (cmake/executorch_runtime.cmake) the bare-metal runner uses, the runner tests/target
# proves bit exact under QEMU, and with this module's platform layer (src/
# executorch_pal_zephyr.cpp). ExecuTorch's own Zephyr module stays off (CONFIG_EXECUTORCH=n):
# what it adds besides the runtime (its backends/cortex_m with a second CMSIS-NN and torchgen
# code generation, install rules, a k_malloc platform layer) cannot break this image.
# docs/zephyr-verification.md gives the reasons. With CONFIG_EXECUTORCH=y (needed only for
# portable fallback kernels) ExecuTorch's module builds the runtime instead.
if(CONFIG_EXECUTORCH)
  if(CONFIG_CORTEX_M_NN_LOADS_PROGRAMS AND NOT CONFIG_EXECUTORCH_ENABLE_PROGRAM_VERIFICATION)
    message(WARNING "cortex-m-nn: this image loads programs at run time, but ExecuTorch's "
                    "flatbuffer verifier is off, so a program is checked by its CRC-32s and "
                    "each kernel call's proof only: set CONFIG_EXECUTORCH_ENABLE_PROGRAM_VERIFICATION=y")
  endif()
  if(NOT TARGET libexecutorch)
    message(FATAL_ERROR "cortex-m-nn: CONFIG_EXECUTORCH=y but ExecuTorch's Zephyr library "
                        "(libexecutorch) is missing: add ExecuTorch to the workspace (west.yml)")
  endif()
  # ExecuTorch's module links its executorch_core to zephyr_interface, which no export set
  # holds, while its top-level CMakeLists.txt installs executorch_core with
  # install(EXPORT ExecuTorchTargets): generating the build then fails. ExecuTorch's Zephyr
  # samples skip install rules for that reason; a cache value reaches every directory at
  # generate time, so setting it here, after ExecuTorch's module ran, is enough.
  set(CMAKE_SKIP_INSTALL_RULES ON CACHE BOOL
      "No install rules in a Zephyr image (cortex-m-nn; ExecuTorch's samples set the same)" FORCE)
  zephyr_library_link_libraries(libexecutorch)
  # Its runtime logs by default (CONFIG_EXECUTORCH_ENABLE_LOGGING), and its log calls print
  # int32_t with %d, a long on Arm: -Wformat, fatal under Twister's -Werror (measured,
  # tests/zephyr/test_zephyr_build.py). Still reported, not fatal, for that library only.
  set_property(TARGET executorch_core APPEND PROPERTY COMPILE_OPTIONS -Wno-error=format)
else()
  if(NOT ZEPHYR_EXECUTORCH_MODULE_DIR)
    message(FATAL_ERROR "cortex-m-nn: ExecuTorch is not in this workspace: add it (west.yml)")
  endif()
  set(EXECUTORCH_ROOT "${ZEPHYR_EXECUTORCH_MODULE_DIR}")
  if(CONFIG_CORTEX_M_NN_EXECUTORCH_LOGGING)
    set(EXECUTORCH_LOGGING ON)
  else()
    set(EXECUTORCH_LOGGING OFF)
  endif()
  # The flatbuffer verifier that loading a program image asks for (off by default, as in
  # ExecuTorch's Kconfig): on for an image that loads programs (Kconfig's default).
  if(CONFIG_CORTEX_M_NN_PROGRAM_VERIFICATION)
    set(EXECUTORCH_ENABLE_PROGRAM_VERIFICATION ON)
  else()
    set(EXECUTORCH_ENABLE_PROGRAM_VERIFICATION OFF)
  endif()
  include("${CORTEX_M_NN_ROOT}/cmake/executorch_runtime.cmake")
  # Compiled with the image's flags (core, float ABI, Zephyr's libc and C++ library).
  target_link_libraries(executorch_core PRIVATE zephyr_interface)
  if(EXECUTORCH_LOGGING)
    # its log calls print int32_t with %d (a long on Arm): reported, not fatal under -Werror
    target_compile_options(executorch_core PRIVATE -Wno-error=format)
  endif()
  target_link_libraries(executorch_prim_ops PRIVATE zephyr_interface)
  zephyr_library_link_libraries(executorch_core)
  zephyr_library_sources("${CORTEX_M_NN_ROOT}/src/executorch_pal_zephyr.cpp"
                         "${EXECUTORCH_KERNEL_REGISTRY_SOURCE}")
endif()

set(_cmnn_prim_ops "")
if(CORTEX_M_NN_IMAGE_PRIM_OPERATORS)
  # ExecuTorch's primitive operators (executorch_prim::), which register themselves statically.
  if(CONFIG_EXECUTORCH)
    # Registered by ExecuTorch's `executorch` library; linked whole, like every Zephyr library.
    if(NOT TARGET executorch)
      message(FATAL_ERROR "cortex-m-nn: the image calls ${CORTEX_M_NN_IMAGE_PRIM_OPERATORS}, "
                          "registered by ExecuTorch's `executorch` library, which is not built")
    endif()
    zephyr_append_cmake_library(executorch)
  else()
    zephyr_library_sources($<TARGET_OBJECTS:executorch_prim_ops>)
  endif()
  # whichever builds the runtime, this file of the workspace's ExecuTorch registers them
  set(_cmnn_prim_ops "${ZEPHYR_EXECUTORCH_MODULE_DIR}/kernels/prim_ops/register_prim_ops.cpp")
endif()
if(CONFIG_CORTEX_M_NN_KERNEL_REGISTRY_SIZED)
  # ExecuTorch's kernel table (runtime/kernel/operator_registry.cpp) with room for the kernels
  # this image registers, not ExecuTorch's 2000.
  include("${CORTEX_M_NN_ROOT}/cmake/kernel_registry.cmake")
  cortex_m_nn_kernel_registry_size(_cmnn_registry KERNELS ${CORTEX_M_NN_IMAGE_KERNELS}
    PRIM_OPS "${_cmnn_prim_ops}" EXTRA "${CONFIG_CORTEX_M_NN_KERNEL_REGISTRY_EXTRA}")
  if(CONFIG_EXECUTORCH)
    # compiled into ExecuTorch's executorch_core library
    if(NOT TARGET executorch_core)
      message(FATAL_ERROR "cortex-m-nn: ExecuTorch's executorch_core library is missing: "
                          "cannot size its kernel registry (set "
                          "CONFIG_CORTEX_M_NN_KERNEL_REGISTRY_SIZED=n)")
    endif()
    set_property(TARGET executorch_core APPEND PROPERTY
                 COMPILE_DEFINITIONS MAX_KERNEL_NUM=${_cmnn_registry})
  else()
    # compiled into this library (cmake/executorch_runtime.cmake leaves it out of the core)
    set_property(SOURCE "${EXECUTORCH_KERNEL_REGISTRY_SOURCE}" APPEND PROPERTY
                 COMPILE_DEFINITIONS MAX_KERNEL_NUM=${_cmnn_registry})
  endif()
  message(STATUS "cortex-m-nn: ExecuTorch's kernel registry sized to ${_cmnn_registry} kernels")
endif()
