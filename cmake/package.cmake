# cortex-m-nn outside Zephyr: the CMake package (included by the top-level CMakeLists.txt, after
# its project(), when not in a Zephyr build; docs/cmake.md).
#
#   cmake -S <this tree> -B build && cmake --install build --prefix <prefix>
#     installs <prefix>/share/cortex_m_nn: the package's CMake files, the firmware API, the
#     kernels and the Python package that writes their registration and embeds programs. It is
#     a source package: every image compiles it for its own core and CMSIS-NN, and a project
#     finds it with find_package(cortex_m_nn) (CMAKE_PREFIX_PATH=<prefix>).
#   add_subdirectory(<this tree>) from a firmware project defines the same functions.
set(CORTEX_M_NN_ROOT "${CMAKE_CURRENT_SOURCE_DIR}" CACHE INTERNAL
    "the cortex-m-nn tree the package uses")
include("${CMAKE_CURRENT_LIST_DIR}/cortex_m_nn.cmake")  # for add_subdirectory's users

# What an installed package holds: the files the package's functions read, and nothing of the
# Zephyr module (tests/python/test_cmake_package.py compares it with what the functions use).
# Only for the package's own project: a firmware that adds this tree with add_subdirectory
# does not install it with its image.
if(NOT CMAKE_SOURCE_DIR STREQUAL CMAKE_CURRENT_SOURCE_DIR)
  return()
endif()
set(_cmnn_share share/cortex_m_nn)
install(FILES
  cmake/cortex_m_nnConfig.cmake
  cmake/cortex_m_nnConfigVersion.cmake
  cmake/cortex_m_nn.cmake
  cmake/sources.cmake
  cmake/python_steps.cmake
  cmake/compile_model.cmake
  cmake/kernel_registry.cmake
  cmake/executorch_runtime.cmake
  cmake/arm-none-eabi.cmake
  DESTINATION ${_cmnn_share}/cmake)
install(DIRECTORY cmake/include DESTINATION ${_cmnn_share}/cmake)
foreach(_cmnn_file IN LISTS CORTEX_M_NN_API_SOURCES CORTEX_M_NN_API_HEADERS
                            CORTEX_M_NN_EMBEDDED_SOURCES)
  get_filename_component(_cmnn_dir "${_cmnn_file}" DIRECTORY)
  install(FILES ${_cmnn_file} DESTINATION ${_cmnn_share}/${_cmnn_dir})
endforeach()
install(DIRECTORY kernels DESTINATION ${_cmnn_share})
install(DIRECTORY python/cortex_m_nn DESTINATION ${_cmnn_share}/python
        PATTERN __pycache__ EXCLUDE PATTERN "*.pyc" EXCLUDE)
