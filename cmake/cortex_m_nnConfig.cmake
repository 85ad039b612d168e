# find_package(cortex_m_nn): the package's functions (cmake/cortex_m_nn.cmake; docs/cmake.md).
# The same file serves an installed package (<prefix>/share/cortex_m_nn/cmake) and a checkout
# (-Dcortex_m_nn_DIR=<checkout>/cmake): either way the tree is the directory above this one.
get_filename_component(CORTEX_M_NN_ROOT "${CMAKE_CURRENT_LIST_DIR}/.." ABSOLUTE)
set(CORTEX_M_NN_ROOT "${CORTEX_M_NN_ROOT}" CACHE INTERNAL "the cortex-m-nn tree the package uses")
include("${CMAKE_CURRENT_LIST_DIR}/cortex_m_nn.cmake")
set(cortex_m_nn_FOUND TRUE)
