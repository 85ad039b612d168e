# ExecuTorch's runtime core (Program, Method, operator registry, minimal PAL) compiled for the
# core from the user's checkout EXECUTORCH_ROOT, as static library `executorch_core`. One file
# for every firmware build: the bare-metal runner that tests/target runs under QEMU, the
# benchmark's ExecuTorch peer, and the Zephyr module (cmake/zephyr_module.cmake, where
# EXECUTORCH_ROOT is the workspace's ExecuTorch), so a Zephyr image runs the runtime the QEMU
# tests prove.
#
# The source list is ExecuTorch's own (EXECUTORCH_CORE_SRCS in
# shim_et/xplat/executorch/build/build_variables.bzl, read the way ExecuTorch's CMake reads
# it), so nothing here names a runtime source file. Not add_subdirectory(EXECUTORCH_ROOT): that
# configures the whole tree (portable kernels, third-party submodules, the Ethos-U preset),
# which a checkout without submodules cannot do and which a runner does not need.
#
# Needs, besides EXECUTORCH_ROOT, a flatbuffers compiler and headers of one version:
#  - FLATC_EXECUTABLE and FLATBUFFERS_INCLUDE_DIR when given (checked: the executorch wheel's
#    flatc with google/flatbuffers v24.3.25's headers; Debian 12's 2.0.8 is too old);
#  - else, when ExecuTorch's third-party/flatbuffers submodule is there (a west workspace
#    fetches it), flatc built from it for the host (ExternalProject, as ExecuTorch's own
#    third-party/CMakeLists.txt builds it) and its headers;
#  - else `flatc` on PATH and the headers installed beside it.
#
# Also defines the OBJECT library `executorch_prim_ops` (executorch_prim::* operators, which
# register themselves statically: link its objects into a program that uses them) and
# EXECUTORCH_KERNEL_REGISTRY_SOURCE, the kernel registry (runtime/kernel/operator_registry.cpp),
# which is not in `executorch_core`: each program compiles it with MAX_KERNEL_NUM set to the
# kernels it registers (cmake/kernel_registry.cmake), not ExecuTorch's 2000 (24 KB of RAM).
# Option EXECUTORCH_LOGGING (default OFF: no log strings in the image; ON: ET_LOG messages
# reach et_pal_emit_log_message). Option EXECUTORCH_ENABLE_PROGRAM_VERIFICATION (default OFF,
# as ExecuTorch's Zephyr Kconfig and its release preset have it: ET_ENABLE_PROGRAM_VERIFICATION=0
# leaves the flatbuffers verifier out, which only Program::load's InternalConsistency mode runs;
# cortex-m-nn's firmware API loads with the default Minimal check). flatbuffers' index checks
# stay on but end in et_pal_abort without the C library's assert and its strings (~3 KB per
# image; cmake/include/cortex_m_nn/flatbuffers_check.h).

if(NOT EXECUTORCH_ROOT AND DEFINED ENV{EXECUTORCH_ROOT})
  set(EXECUTORCH_ROOT "$ENV{EXECUTORCH_ROOT}")
endif()
set(_variables "${EXECUTORCH_ROOT}/shim_et/xplat/executorch/build/build_variables.bzl")
if(NOT EXECUTORCH_ROOT OR NOT EXISTS "${_variables}")
  message(FATAL_ERROR
    "ExecuTorch not found: set EXECUTORCH_ROOT to an ExecuTorch source checkout "
    "(https://github.com/pytorch/executorch; needs runtime/, schema/, kernels/prim_ops/, "
    "shim_et/xplat/executorch/build/build_variables.bzl)")
endif()
option(EXECUTORCH_LOGGING "Keep ExecuTorch's ET_LOG messages (and their strings)" OFF)
option(EXECUTORCH_ENABLE_PROGRAM_VERIFICATION
       "Keep ExecuTorch's flatbuffers verifier (Program::load's InternalConsistency mode)" OFF)

find_package(Python3 REQUIRED COMPONENTS Interpreter)
function(_executorch_filelist name out)
  execute_process(
    COMMAND "${Python3_EXECUTABLE}" -c
            "exec(open(r'${_variables}').read()); print(';'.join(${name}))"
    OUTPUT_VARIABLE _list OUTPUT_STRIP_TRAILING_WHITESPACE RESULT_VARIABLE _rc)
  if(NOT _rc EQUAL 0)
    message(FATAL_ERROR "cannot read ${name} from ${_variables}")
  endif()
  list(TRANSFORM _list PREPEND "${EXECUTORCH_ROOT}/")
  set(${out} "${_list}" PARENT_SCOPE)
endfunction()
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS "${_variables}")

_executorch_filelist(EXECUTORCH_CORE_SRCS _core_sources)
# The platform layer: ExecuTorch's weak minimal PAL; the runner overrides what it uses.
list(FILTER _core_sources EXCLUDE REGEX "runtime/platform/default/[^/]*\\.cpp$")
list(APPEND _core_sources "${EXECUTORCH_ROOT}/runtime/platform/default/minimal.cpp")
set(EXECUTORCH_KERNEL_REGISTRY_SOURCE "${EXECUTORCH_ROOT}/runtime/kernel/operator_registry.cpp")
list(FIND _core_sources "${EXECUTORCH_KERNEL_REGISTRY_SOURCE}" _registry_index)
if(_registry_index LESS 0)
  message(FATAL_ERROR "EXECUTORCH_CORE_SRCS has no runtime/kernel/operator_registry.cpp: this "
                      "ExecuTorch keeps its kernel registry elsewhere")
endif()
list(REMOVE_ITEM _core_sources "${EXECUTORCH_KERNEL_REGISTRY_SOURCE}")
set(EXECUTORCH_PRIM_OPS_SOURCE "${EXECUTORCH_ROOT}/kernels/prim_ops/register_prim_ops.cpp")
_executorch_filelist(EXECUTORCH_SRCS _prim_sources)

# Sources include <executorch/...>: give the checkout that name whatever its directory is.
set(_include_root "${CMAKE_CURRENT_BINARY_DIR}/executorch-include")
file(MAKE_DIRECTORY "${_include_root}")
if(NOT EXISTS "${_include_root}/executorch")
  file(CREATE_LINK "${EXECUTORCH_ROOT}" "${_include_root}/executorch" SYMBOLIC)
endif()

# --- program schema headers (flatc) ----------------------------------------------------------
set(_flatbuffers_submodule "${EXECUTORCH_ROOT}/third-party/flatbuffers")
set(_flatc_target)
if(NOT FLATC_EXECUTABLE AND EXISTS "${_flatbuffers_submodule}/CMakeLists.txt"
   AND EXISTS "${_flatbuffers_submodule}/include/flatbuffers/flatbuffers.h")
  # Built for the host whatever the firmware's toolchain is: the toolchain file is unset.
  include(ExternalProject)
  ExternalProject_Add(executorch_flatc
    SOURCE_DIR "${_flatbuffers_submodule}"
    PREFIX "${CMAKE_CURRENT_BINARY_DIR}/flatc"
    CMAKE_ARGS -DFLATBUFFERS_BUILD_FLATC=ON -DFLATBUFFERS_BUILD_FLATLIB=OFF
               -DFLATBUFFERS_BUILD_FLATHASH=OFF -DFLATBUFFERS_BUILD_TESTS=OFF
               -DFLATBUFFERS_INSTALL=OFF -DCMAKE_BUILD_TYPE=Release -DCMAKE_TOOLCHAIN_FILE=
    INSTALL_COMMAND ""
    BUILD_BYPRODUCTS "<BINARY_DIR>/flatc")
  ExternalProject_Get_Property(executorch_flatc BINARY_DIR)
  set(FLATC_EXECUTABLE "${BINARY_DIR}/flatc")
  set(_flatc_target executorch_flatc)
  if(NOT FLATBUFFERS_INCLUDE_DIR)
    set(FLATBUFFERS_INCLUDE_DIR "${_flatbuffers_submodule}/include")
  endif()
endif()
find_program(FLATC_EXECUTABLE flatc)
if(NOT FLATC_EXECUTABLE)
  message(FATAL_ERROR "flatc not found: fetch ExecuTorch's third-party/flatbuffers submodule "
                      "(git submodule update --init third-party/flatbuffers), install a "
                      "flatbuffers compiler of the headers' version, or pass "
                      "-DFLATC_EXECUTABLE=/path/to/flatc")
endif()
if(NOT FLATBUFFERS_INCLUDE_DIR)
  # The headers installed beside flatc (a system or SDK install of flatbuffers).
  get_filename_component(_flatc_prefix "${FLATC_EXECUTABLE}" DIRECTORY)
  find_path(FLATBUFFERS_INCLUDE_DIR flatbuffers/flatbuffers.h
            HINTS "${_flatc_prefix}/../include" NO_CMAKE_FIND_ROOT_PATH)
endif()
if(NOT FLATBUFFERS_INCLUDE_DIR)
  message(FATAL_ERROR "flatbuffers headers not found: initialise ExecuTorch's third-party/"
                      "flatbuffers submodule, install libflatbuffers-dev, or pass "
                      "-DFLATBUFFERS_INCLUDE_DIR (same version as flatc)")
endif()
# Only the flatbuffers directory, never the rest of e.g. /usr/include (host C headers).
set(_flatbuffers_include "${CMAKE_CURRENT_BINARY_DIR}/flatbuffers-include")
file(MAKE_DIRECTORY "${_flatbuffers_include}")
if(NOT EXISTS "${_flatbuffers_include}/flatbuffers")
  file(CREATE_LINK "${FLATBUFFERS_INCLUDE_DIR}/flatbuffers" "${_flatbuffers_include}/flatbuffers"
       SYMBOLIC)
endif()
set(_schema_out "${CMAKE_CURRENT_BINARY_DIR}/schema-include/executorch/schema")
add_custom_command(
  OUTPUT "${_schema_out}/program_generated.h" "${_schema_out}/scalar_type_generated.h"
  COMMAND "${FLATC_EXECUTABLE}" --cpp --cpp-std c++11 --gen-mutable --scoped-enums
          -o "${_schema_out}" "${EXECUTORCH_ROOT}/schema/program.fbs"
          "${EXECUTORCH_ROOT}/schema/scalar_type.fbs"
  DEPENDS "${EXECUTORCH_ROOT}/schema/program.fbs" "${EXECUTORCH_ROOT}/schema/scalar_type.fbs"
          ${_flatc_target}
  COMMENT "ExecuTorch: generating program schema headers"
  VERBATIM)
add_custom_target(executorch_schema DEPENDS "${_schema_out}/program_generated.h")

add_library(executorch_core STATIC ${_core_sources})
add_dependencies(executorch_core executorch_schema)
target_include_directories(executorch_core PUBLIC
  "${_include_root}"
  "${EXECUTORCH_ROOT}/runtime/core/portable_type/c10"
  "${CMAKE_CURRENT_BINARY_DIR}/schema-include"
  "${_flatbuffers_include}"
  "${CMAKE_CURRENT_LIST_DIR}/include")
target_compile_definitions(executorch_core PUBLIC
  C10_USING_CUSTOM_GENERATED_MACROS
  FLATBUFFERS_MAX_ALIGNMENT=1024
  # flatbuffers' index checks end in et_pal_abort, without assert's strings (the header says why)
  FLATBUFFERS_ASSERT=CORTEX_M_NN_FLATBUFFERS_CHECK
  FLATBUFFERS_ASSERT_INCLUDE=<cortex_m_nn/flatbuffers_check.h>
  $<$<NOT:$<BOOL:${EXECUTORCH_LOGGING}>>:ET_LOG_ENABLED=0>
  $<$<NOT:$<BOOL:${EXECUTORCH_ENABLE_PROGRAM_VERIFICATION}>>:ET_ENABLE_PROGRAM_VERIFICATION=0>)
target_compile_options(executorch_core PRIVATE -fno-exceptions -fno-rtti -Wno-psabi)

add_library(executorch_prim_ops OBJECT ${_prim_sources})
target_link_libraries(executorch_prim_ops PUBLIC executorch_core)
target_compile_options(executorch_prim_ops PRIVATE -fno-exceptions -fno-rtti -Wno-psabi)
