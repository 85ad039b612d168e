# The tree's source lists, one place for every build of it: the CMake package
# (cmake/cortex_m_nn.cmake, its install in cmake/package.cmake), the Zephyr module
# (cmake/zephyr_module.cmake), the kernels' own build (kernels/CMakeLists.txt) and the CMSIS-Pack
# (cortex_m_nn.embed.cmsis_pack reads this file: keep each list one `set(NAME path...)` of plain
# paths). Paths are relative to the tree. The kernels of the operators are
# kernels/op_<name>.cpp, one per operator of python/cortex_m_nn/ops/operators.yaml.

# The firmware API (include/cortex_m_nn/model.h), for any image.
set(CORTEX_M_NN_API_SOURCES
  src/model.cpp
  src/model_run.cpp
  src/program_image.cpp)
set(CORTEX_M_NN_API_HEADERS
  include/cortex_m_nn/model.h
  include/cortex_m_nn/program_image.h
  src/model_state.h)
# An image with an embedded model adds this (it includes the model's cortex_m_nn_model.h).
set(CORTEX_M_NN_EMBEDDED_SOURCES
  src/model_embedded.cpp)
# What every kernel needs besides CMSIS-NN: the ABI check, the call mode, and our own compute
# functions (cortex_m_nn/compute.h) that kernel cases call in place of a CMSIS-NN function,
# each in a section of its own so an image keeps only those its cases call.
set(CORTEX_M_NN_KERNEL_SUPPORT_SOURCES
  kernels/abi.cpp
  kernels/call_mode.cpp
  kernels/compute/depthwise_conv_lanes_s8.cpp
  kernels/compute/fully_connected_quads_s8.cpp
  kernels/compute/pixel_pairs.cpp
  kernels/compute/pixel_quads.cpp
  kernels/compute/pointwise_conv_s8.cpp
  kernels/compute/window_conv_s8.cpp)
