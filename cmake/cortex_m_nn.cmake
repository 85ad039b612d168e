# cortex-m-nn as a CMake package, for firmware built without Zephyr (docs/cmake.md).
#
#   find_package(cortex_m_nn CONFIG REQUIRED)      # installed: cmake --install <build> --prefix P
#   add_subdirectory(<cortex-m-nn checkout> cortex_m_nn)    # or a checkout (FetchContent's too)
#
#   cortex_m_nn_runtime(TARGET <core[+isa]> [ROUNDING double|single]
#                       [EXECUTORCH_ROOT <dir>] [CMSIS_NN_PATH <dir>])
#     Once per build, compiled with the project's toolchain and flags for that core: CMSIS-NN
#     (target cmsis-nn), our kernels (cortex_m_nn_kernels: every case, each a function in a
#     section of its own, linked only where registered), ExecuTorch's runtime core
#     (executorch_core, executorch_prim_ops; cmake/executorch_runtime.cmake) and the firmware
#     API (cortex_m_nn_api: include/cortex_m_nn/model.h). TARGET is what models are compiled
#     for and prebuilt ones are checked against; the core's compiler flags (-mcpu, float ABI)
#     are the toolchain's, and the kernels check at load that the program's ISA is theirs.
#
#   cortex_m_nn_add_model(<executable> (PTE <file.pte> | MODEL <source> [OPTIONS <option>...]
#                                       [TEST_VECTOR])
#                         [METHOD_MARGIN <percent>] [FLASH <bytes>] [RAM <bytes>]
#                         [CASES <case>...] [OUTPUT_DIR <dir>])
#     Embeds one program in <executable>, as the Zephyr module does, at configure time (again
#     when an input changes): MODEL (ds_cnn, file.pt2, path/file.py:factory; relative paths are
#     the calling directory's) is compiled first for TARGET with OPTIONS (TEST_VECTOR: and
#     cortex_m_nn_test_vector.h, an input and its reference outputs); `cortex-m-compile
#     embed` writes the program's C source, cortex_m_nn_model.h (its prepared table and the
#     planned arena and allocator sizes; include it) and the kernel cases it calls, refusing
#     one that does not fit FLASH/RAM when given. <executable> then registers and links those
#     cases only (CASES: others instead, for tests) and ExecuTorch's registry holds exactly
#     them. Sets the program's facts (cortex_m_nn_model.cmake) in the caller's scope:
#     CORTEX_M_NN_MODEL_BYTES, CORTEX_M_NN_ARENA_BYTES, CORTEX_M_NN_METHOD_ALLOCATOR_BYTES and
#     CORTEX_M_NN_MODEL_{CASES,KERNELS,PRIM_OPERATORS,CORE,ISA,ROUNDING}.
#
#   cortex_m_nn_register_kernels(<executable> CASES <case|operator>... [PRIM_OPERATORS <op>...])
#     For an image that loads its programs at run time (no embedded model): registers these
#     kernel cases (an operator name: all its cases), links the API and the runtime, and sizes
#     the registry. cortex_m_nn_add_model calls it.
#
# Python: the steps run this tree's python/cortex_m_nn (so the generator always matches these
# kernels) with an interpreter that has its dependencies (cmake/python_steps.cmake says which).
include_guard(GLOBAL)
if(NOT CORTEX_M_NN_ROOT)
  get_filename_component(CORTEX_M_NN_ROOT "${CMAKE_CURRENT_LIST_DIR}/.." ABSOLUTE)
endif()
include("${CORTEX_M_NN_ROOT}/cmake/sources.cmake")
include("${CORTEX_M_NN_ROOT}/cmake/python_steps.cmake")
include("${CORTEX_M_NN_ROOT}/cmake/kernel_registry.cmake")
include("${CORTEX_M_NN_ROOT}/cmake/compile_model.cmake")

# A macro: ExecuTorch's runtime file sets variables (its registry and prim-ops sources) that
# the later steps read.
macro(cortex_m_nn_runtime)
  cmake_parse_arguments(_cmnn_rt "" "TARGET;ROUNDING;EXECUTORCH_ROOT;CMSIS_NN_PATH" "" ${ARGN})
  if(TARGET cortex_m_nn_api)
    message(FATAL_ERROR "cortex-m-nn: cortex_m_nn_runtime() is called once per build")
  endif()
  if(NOT _cmnn_rt_TARGET)
    message(FATAL_ERROR "cortex-m-nn: cortex_m_nn_runtime(TARGET <core>) names the core, e.g. "
                        "cortex-m55, cortex-m33 or cortex-m4+scalar")
  endif()
  if(NOT _cmnn_rt_ROUNDING)
    set(_cmnn_rt_ROUNDING double)
  endif()
  if(_cmnn_rt_EXECUTORCH_ROOT)
    set(EXECUTORCH_ROOT "${_cmnn_rt_EXECUTORCH_ROOT}")
  endif()
  if(_cmnn_rt_CMSIS_NN_PATH)
    set(CMSIS_NN_PATH "${_cmnn_rt_CMSIS_NN_PATH}")
  endif()
  _cmnn_runtime_target("${_cmnn_rt_TARGET}" "${_cmnn_rt_ROUNDING}")
  _cmnn_load_state()
  # The kernels' build reads these (kernels/CMakeLists.txt).
  set(CORTEX_M_NN_ROUNDING "${_cmnn_rounding}" CACHE STRING "" FORCE)
  set(Python3_EXECUTABLE "${_cmnn_python_executable}")
  include("${CORTEX_M_NN_ROOT}/cmake/executorch_runtime.cmake")
  set_property(GLOBAL PROPERTY CORTEX_M_NN_EXECUTORCH_SOURCES
               "${EXECUTORCH_KERNEL_REGISTRY_SOURCE}" "${EXECUTORCH_PRIM_OPS_SOURCE}")
  add_subdirectory("${CORTEX_M_NN_ROOT}/kernels" cortex_m_nn_kernels)
  list(TRANSFORM CORTEX_M_NN_API_SOURCES PREPEND "${CORTEX_M_NN_ROOT}/" OUTPUT_VARIABLE _cmnn_api)
  add_library(cortex_m_nn_api STATIC ${_cmnn_api})
  target_include_directories(cortex_m_nn_api PUBLIC "${CORTEX_M_NN_ROOT}/include")
  target_link_libraries(cortex_m_nn_api PUBLIC cortex_m_nn_kernels executorch_core)
endmacro()

# The target and rounding, checked by the package's own parser; the Python that runs the steps.
function(_cmnn_runtime_target target rounding)
  if(NOT rounding MATCHES "^(double|single)$")
    message(FATAL_ERROR "cortex-m-nn: ROUNDING is double or single, not '${rounding}'")
  endif()
  find_package(Python3 COMPONENTS Interpreter QUIET)
  _cmnn_find_python(python NEEDS yaml flatbuffers INSTALL "pip install cortex-m-nn"
                    LAST "${Python3_EXECUTABLE}")
  execute_process(
    COMMAND ${CMAKE_COMMAND} -E env "PYTHONPATH=${CORTEX_M_NN_ROOT}/python" ${python} -c
            "import sys; from cortex_m_nn.core.target import Target, TargetError
try: t = Target.parse(sys.argv[1])
except TargetError as e: sys.exit(str(e))
print(f'{t.core.value};{t.isa.value}')" "${target}"
    RESULT_VARIABLE status OUTPUT_VARIABLE parsed ERROR_VARIABLE error
    OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_STRIP_TRAILING_WHITESPACE)
  if(NOT status EQUAL 0)
    string(REGEX REPLACE ".*\n" "" error "${error}")
    message(FATAL_ERROR "cortex-m-nn: TARGET ${target}: ${error}")
  endif()
  list(GET parsed 0 core)
  list(GET parsed 1 isa)
  # Global, so the functions work from any directory of the project.
  set_property(GLOBAL PROPERTY CORTEX_M_NN_STATE "${core}" "${isa}" "${rounding}" "${python}")
  message(STATUS "cortex-m-nn: target ${core}+${isa}, rounding ${rounding}")
endfunction()

# The runtime's choices as the steps' variables (cmake/compile_model.cmake reads _cmnn_target,
# _cmnn_rounding and _cmnn_cli), in the caller's scope.
macro(_cmnn_load_state)
  get_property(_cmnn_state GLOBAL PROPERTY CORTEX_M_NN_STATE)
  if(NOT _cmnn_state)
    message(FATAL_ERROR "cortex-m-nn: call cortex_m_nn_runtime(TARGET <core>) first")
  endif()
  list(GET _cmnn_state 0 _cmnn_core)
  list(GET _cmnn_state 1 _cmnn_isa)
  list(GET _cmnn_state 2 _cmnn_rounding)
  list(GET _cmnn_state 3 _cmnn_python_executable)
  set(_cmnn_target "${_cmnn_core}+${_cmnn_isa}")
  set(_cmnn_python ${CMAKE_COMMAND} -E env "PYTHONPATH=${CORTEX_M_NN_ROOT}/python"
      ${_cmnn_python_executable})
  set(_cmnn_cli ${_cmnn_python} -m cortex_m_nn.cli.main)
endmacro()

function(cortex_m_nn_add_model executable)
  cmake_parse_arguments(A "TEST_VECTOR" "PTE;MODEL;METHOD_MARGIN;FLASH;RAM;OUTPUT_DIR"
                        "OPTIONS;CASES" ${ARGN})
  _cmnn_load_state()
  if((A_PTE AND A_MODEL) OR (NOT A_PTE AND NOT A_MODEL))
    message(FATAL_ERROR "cortex-m-nn: cortex_m_nn_add_model(${executable}) takes PTE <file.pte> "
                        "or MODEL <source>, one of them")
  endif()
  set(_cmnn_base_dir "${CMAKE_CURRENT_SOURCE_DIR}")
  set(out "${CMAKE_CURRENT_BINARY_DIR}/cortex_m_nn/${executable}")
  if(A_OUTPUT_DIR)
    get_filename_component(out "${A_OUTPUT_DIR}" ABSOLUTE BASE_DIR "${CMAKE_CURRENT_BINARY_DIR}")
  endif()
  file(MAKE_DIRECTORY "${out}")
  if(A_MODEL)
    # compiling needs torch: the Python the runtime chose may have only the embedding's modules
    _cmnn_find_python(python NEEDS torch torchao executorch yaml flatbuffers
                      INSTALL "pip install cortex-m-nn" LAST "${_cmnn_python_executable}")
    set(_cmnn_cli ${CMAKE_COMMAND} -E env "PYTHONPATH=${CORTEX_M_NN_ROOT}/python" ${python}
        -m cortex_m_nn.cli.main)
    set(pte "${out}/model.pte")
    if(A_TEST_VECTOR)
      list(APPEND A_OPTIONS --test-vector "${out}/cortex_m_nn_test_vector.h")
    endif()
    _cmnn_compile("${A_MODEL}" "${pte}" OPTIONS ${A_OPTIONS})
  else()
    if(A_TEST_VECTOR)
      message(FATAL_ERROR "cortex-m-nn: TEST_VECTOR needs MODEL (the compile writes it); for a "
                          ".pte, cortex-m-compile --test-vector writes one beside it")
    endif()
    _cmnn_prebuilt(pte PTE "${A_PTE}")
  endif()
  # a new package writes the embedding again (its format is the package's)
  set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS
    "${CORTEX_M_NN_ROOT}/python/cortex_m_nn/version.py"
    "${CORTEX_M_NN_ROOT}/python/cortex_m_nn/embed/pte_source.py")
  _cmnn_embed("${pte}" "${out}" "${A_METHOD_MARGIN}" "${A_FLASH}" "${A_RAM}")
  include("${out}/cortex_m_nn_model.cmake")
  _cmnn_check_model("${executable}")
  set(cases ${CORTEX_M_NN_MODEL_CASES})
  if(A_CASES)
    set(cases ${A_CASES})
  endif()
  cortex_m_nn_register_kernels(${executable} CASES ${cases}
                               PRIM_OPERATORS ${CORTEX_M_NN_MODEL_PRIM_OPERATORS}
                               OUTPUT_DIR "${out}/registration")
  list(TRANSFORM CORTEX_M_NN_EMBEDDED_SOURCES PREPEND "${CORTEX_M_NN_ROOT}/" OUTPUT_VARIABLE embedded)
  target_sources(${executable} PRIVATE "${out}/cortex_m_nn_model.c" ${embedded})
  target_include_directories(${executable} PRIVATE "${out}")
  foreach(name MODEL_BYTES ARENA_BYTES METHOD_ALLOCATOR_BYTES MODEL_CASES MODEL_KERNELS
               MODEL_PRIM_OPERATORS MODEL_CORE MODEL_ISA MODEL_ROUNDING)
    set(CORTEX_M_NN_${name} "${CORTEX_M_NN_${name}}" PARENT_SCOPE)
  endforeach()
endfunction()

# cortex-m-compile embed: the program's source, header and facts, checked against the memories.
function(_cmnn_embed pte out margin flash ram)
  set(embed "${pte}" --output-dir "${out}" -q)
  if(NOT "${margin}" STREQUAL "")
    list(APPEND embed --method-margin ${margin})
  endif()
  if(flash)
    list(APPEND embed --flash ${flash})
  endif()
  if(ram)
    list(APPEND embed --ram ${ram})
  endif()
  get_filename_component(name "${pte}" NAME)
  _cmnn_run("cortex-m-compile embed ${name}" ${_cmnn_cli} embed ${embed})
endfunction()

# A program for another target, or one that needs ExecuTorch's portable kernels: one line each.
function(_cmnn_check_model executable)
  if(NOT CORTEX_M_NN_MODEL_CORE STREQUAL _cmnn_core
     OR NOT CORTEX_M_NN_MODEL_ISA STREQUAL _cmnn_isa
     OR NOT CORTEX_M_NN_MODEL_ROUNDING STREQUAL _cmnn_rounding)
    message(FATAL_ERROR
      "cortex-m-nn: ${executable}'s model was compiled for ${CORTEX_M_NN_MODEL_CORE}+"
      "${CORTEX_M_NN_MODEL_ISA} with ${CORTEX_M_NN_MODEL_ROUNDING} rounding, but this build is "
      "${_cmnn_target} with ${_cmnn_rounding} rounding: recompile it with cortex-m-compile "
      "--target ${_cmnn_target} --rounding ${_cmnn_rounding}")
  endif()
  if(CORTEX_M_NN_MODEL_FALLBACK_OPERATORS)
    message(FATAL_ERROR "cortex-m-nn: ${executable}'s model calls ExecuTorch's portable "
                        "${CORTEX_M_NN_MODEL_FALLBACK_OPERATORS}, which this package does not "
                        "build: compile it without --allow-fallback")
  endif()
  message(STATUS "cortex-m-nn: ${executable}: model ${CORTEX_M_NN_MODEL_BYTES} B, arena "
                 "${CORTEX_M_NN_ARENA_BYTES} B, method allocator "
                 "${CORTEX_M_NN_METHOD_ALLOCATOR_BYTES} B; kernel cases: "
                 "${CORTEX_M_NN_MODEL_CASES}")
endfunction()

function(cortex_m_nn_register_kernels executable)
  cmake_parse_arguments(A "" "OUTPUT_DIR" "CASES;PRIM_OPERATORS" ${ARGN})
  _cmnn_load_state()
  get_property(executorch GLOBAL PROPERTY CORTEX_M_NN_EXECUTORCH_SOURCES)
  list(GET executorch 0 EXECUTORCH_KERNEL_REGISTRY_SOURCE)
  list(GET executorch 1 prim_ops_source)
  set(out "${CMAKE_CURRENT_BINARY_DIR}/cortex_m_nn/${executable}/registration")
  if(A_OUTPUT_DIR)
    get_filename_component(out "${A_OUTPUT_DIR}" ABSOLUTE BASE_DIR "${CMAKE_CURRENT_BINARY_DIR}")
  endif()
  # a new package (its generator, operators or version) writes the registration again
  set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS
    "${CORTEX_M_NN_ROOT}/python/cortex_m_nn/version.py"
    "${CORTEX_M_NN_ROOT}/python/cortex_m_nn/ops/operators.yaml"
    "${CORTEX_M_NN_ROOT}/python/cortex_m_nn/embed/kernel_codegen.py")
  string(REPLACE ";" "," only "${A_CASES}")
  set(codegen --output-dir "${out}" --only "${only}")
  if(A_PRIM_OPERATORS)
    string(REPLACE ";" "," prims "${A_PRIM_OPERATORS}")
    list(APPEND codegen --prim-operators "${prims}")
  endif()
  _cmnn_run("generating ${executable}'s kernel registration" ${_cmnn_python}
            -m cortex_m_nn.embed.kernel_codegen ${codegen})
  target_sources(${executable} PRIVATE "${out}/cortex_m_nn_register.cpp")
  target_include_directories(${executable} PRIVATE "${out}")
  target_link_libraries(${executable} PRIVATE cortex_m_nn_api cortex_m_nn_kernels executorch_core)
  # One registry entry per operator registered, and ExecuTorch's primitive operators (they
  # register themselves; linked as objects so the linker keeps them) when the program calls any.
  set(operators)
  foreach(case IN LISTS A_CASES)
    string(REGEX REPLACE "\\..*" "" operator "${case}")
    list(APPEND operators ${operator})
  endforeach()
  list(REMOVE_DUPLICATES operators)
  set(prim_source)
  if(A_PRIM_OPERATORS)
    target_sources(${executable} PRIVATE $<TARGET_OBJECTS:executorch_prim_ops>)
    set(prim_source "${prim_ops_source}")
  endif()
  cortex_m_nn_kernel_registry_size(size KERNELS ${operators} PRIM_OPS "${prim_source}")
  cortex_m_nn_kernel_registry(${executable} ${size})
endfunction()
