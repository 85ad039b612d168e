# cortex-m-nn's Zephyr build (included by zephyr/CMakeLists.txt, the module's CMake, when
# CONFIG_CORTEX_M_NN).
#
#  1. the target (core, ISA, rounding) from Kconfig;
#  2. the model: CONFIG_CORTEX_M_NN_MODEL_PTE, or CONFIG_CORTEX_M_NN_MODEL_SOURCE compiled here
#     with cortex-m-compile for that target (at configure time, again only when an input
#     changes);
#  3. cortex-m-compile embed: the model's C source (section .cortex_m_nn_model, 16-byte
#     aligned), cortex_m_nn_model.h (planned arena, scratch, method allocator) and the list of
#     operators it calls, after checking it fits the memories the devicetree gives (steps 2
#     and 3: cmake/zephyr_model.cmake, with CONFIG_CORTEX_M_NN_EMBEDDED_MODEL); and the
#     programs loaded at run time: their images and the kernels they call
#     (cmake/zephyr_programs.cmake);
#  4. the Zephyr library cortex_m_nn: the kernels of those operators only, their registration,
#     the embedded model and src/model.cpp (include/cortex_m_nn/model.h);
#  5. the model's placement (linker fragments);
#  6. ExecuTorch's runtime: built here (cmake/executorch_runtime.cmake, as the QEMU runner
#     builds it), or ExecuTorch's Zephyr module's with CONFIG_EXECUTORCH=y;
#  7. ExecuTorch's portable kernels for what is not ours (CONFIG_EXECUTORCH=y only).
#
# Zephyr APIs used here (checked against zephyrproject-rtos/zephyr, docs/zephyr-verification.md):
# zephyr_library_named, zephyr_library_sources, zephyr_library_include_directories,
# zephyr_library_compile_definitions, zephyr_library_link_libraries, zephyr_include_directories,
# zephyr_compile_definitions, zephyr_linker_sources, zephyr_append_cmake_library, dt_chosen,
# dt_nodelabel, dt_prop, dt_reg_addr, dt_reg_size; the target zephyr_interface; variables BOARD,
# BOARD_QUALIFIERS, PYTHON_EXECUTABLE, APPLICATION_SOURCE_DIR, ZEPHYR_EXECUTORCH_MODULE_DIR,
# ZEPHYR_CMSIS_NN_MODULE_DIR.

get_filename_component(CORTEX_M_NN_ROOT "${CMAKE_CURRENT_LIST_DIR}/.." ABSOLUTE)
set(_cmnn_out "${CMAKE_CURRENT_BINARY_DIR}/cortex_m_nn")
file(MAKE_DIRECTORY "${_cmnn_out}")

set(_cmnn_base_dir "${APPLICATION_SOURCE_DIR}")  # Kconfig's paths are the application's
include("${CORTEX_M_NN_ROOT}/cmake/python_steps.cmake")

# --- 1. the target ----------------------------------------------------------------------------

set(_cmnn_core)
foreach(_cmnn_pair
    M0:cortex-m0 M0PLUS:cortex-m0plus M3:cortex-m3 M4:cortex-m4 M7:cortex-m7 M23:cortex-m23
    M33:cortex-m33 M52:cortex-m52 M55:cortex-m55 M85:cortex-m85)
  string(REPLACE ":" ";" _cmnn_pair "${_cmnn_pair}")
  list(GET _cmnn_pair 0 _cmnn_symbol)
  list(GET _cmnn_pair 1 _cmnn_name)
  if(CONFIG_CPU_CORTEX_${_cmnn_symbol})
    set(_cmnn_core ${_cmnn_name})
  endif()
endforeach()
if(NOT _cmnn_core)
  message(FATAL_ERROR "cortex-m-nn: this Cortex-M core is not a cortex-m-nn target; targets: "
                      "cortex-m0, m0plus, m3, m4, m7, m23, m33, m52, m55, m85")
endif()

if(CONFIG_CORTEX_M_NN_ISA_MVE)
  set(_cmnn_isa mve)
elseif(CONFIG_CORTEX_M_NN_ISA_DSP)
  set(_cmnn_isa dsp)
else()
  set(_cmnn_isa scalar)
endif()
set(_cmnn_target "${_cmnn_core}+${_cmnn_isa}")

if(CONFIG_CORTEX_M_NN_ROUNDING_SINGLE)
  set(_cmnn_rounding single)
  # The whole image's CMSIS-NN (Zephyr's modules/cmsis-nn library) uses one rounding.
  zephyr_compile_definitions(CMSIS_NN_USE_SINGLE_ROUNDING)
else()
  set(_cmnn_rounding double)
endif()

if(CONFIG_CORTEX_M_NN_MVE_WITHOUT_FPU)
  message(WARNING
    "cortex-m-nn: this core has Helium (MVE) but CONFIG_FPU is off, so the compiler (soft "
    "float) and CMSIS-NN leave MVE out and the kernels run the slower DSP path: set "
    "CONFIG_FPU=y and CONFIG_FP_HARDABI=y")
elseif(CONFIG_CORTEX_M_NN_MVE_SOFT_ABI)
  message(STATUS
    "cortex-m-nn: MVE with -mfloat-abi=softfp (CONFIG_FP_SOFTABI); CONFIG_FP_HARDABI=y passes "
    "floats in FPU registers")
endif()
if(CONFIG_STD_CPP98 OR CONFIG_STD_CPP11 OR CONFIG_STD_CPP14)
  message(FATAL_ERROR "cortex-m-nn: ExecuTorch needs C++17: set CONFIG_STD_CPP17=y")
endif()
message(STATUS "cortex-m-nn: target ${_cmnn_target}, rounding ${_cmnn_rounding}")

# --- Python: an interpreter that can run this checkout's cortex_m_nn package ----------------
#
# Compiling a model (CONFIG_CORTEX_M_NN_MODEL_SOURCE) needs torch, torchao and executorch; a
# .pte compiled elsewhere (CONFIG_CORTEX_M_NN_MODEL_PTE) needs only what `embed` and the
# registration generator read it with. cmake/python_steps.cmake says which Python is chosen;
# the last candidate is Zephyr's (PYTHON_EXECUTABLE).

set(_cmnn_compiles OFF)
if(CONFIG_CORTEX_M_NN_EMBEDDED_MODEL AND "${CONFIG_CORTEX_M_NN_MODEL_PTE}" STREQUAL "")
  set(_cmnn_compiles ON)
endif()
set(_cmnn_needs yaml flatbuffers)
set(_cmnn_prebuilt)
if(_cmnn_compiles)
  set(_cmnn_needs torch torchao executorch yaml flatbuffers)
  set(_cmnn_prebuilt "; or compile the model where torch is (cortex-m-compile <model> \
--target ${_cmnn_target} --rounding ${_cmnn_rounding} -o model.pte) and set \
CONFIG_CORTEX_M_NN_MODEL_PTE=\"model.pte\" instead of CONFIG_CORTEX_M_NN_MODEL_SOURCE")
endif()
_cmnn_find_python(_cmnn_chosen NEEDS ${_cmnn_needs} INSTALL "pip install -e ${CORTEX_M_NN_ROOT}"
                  LAST "${PYTHON_EXECUTABLE}" HINT "${_cmnn_prebuilt}")
set(_cmnn_python ${CMAKE_COMMAND} -E env "PYTHONPATH=${CORTEX_M_NN_ROOT}/python" ${_cmnn_chosen})
set(_cmnn_cli ${_cmnn_python} -m cortex_m_nn.cli.main)

include("${CORTEX_M_NN_ROOT}/cmake/compile_model.cmake")

# --- 2., 3. the embedded model, and the programs loaded at run time --------------------------

set(CORTEX_M_NN_MODEL_KERNELS)
set(CORTEX_M_NN_MODEL_KERNEL_SOURCES)
set(CORTEX_M_NN_MODEL_CASES)
set(CORTEX_M_NN_MODEL_PRIM_OPERATORS)
set(CORTEX_M_NN_MODEL_FALLBACK_OPERATORS)
if(CONFIG_CORTEX_M_NN_EMBEDDED_MODEL)
  include("${CORTEX_M_NN_ROOT}/cmake/zephyr_model.cmake")
endif()
# What the image registers: the embedded model's kernels, and those of the programs it loads.
set(CORTEX_M_NN_IMAGE_KERNELS ${CORTEX_M_NN_MODEL_KERNELS})
set(CORTEX_M_NN_IMAGE_KERNEL_SOURCES ${CORTEX_M_NN_MODEL_KERNEL_SOURCES})
set(CORTEX_M_NN_IMAGE_CASES ${CORTEX_M_NN_MODEL_CASES})
set(CORTEX_M_NN_IMAGE_PRIM_OPERATORS ${CORTEX_M_NN_MODEL_PRIM_OPERATORS})
if(CONFIG_CORTEX_M_NN_LOADS_PROGRAMS)
  include("${CORTEX_M_NN_ROOT}/cmake/zephyr_programs.cmake")
endif()

# --- 4. the kernels the image calls, registered, and the API ----------------------------------

set(_cmnn_generated "${_cmnn_out}/generated")
# Registration of the kernel cases the model and the programs call (or all of them): the
# others' functions (and the CMSIS-NN functions only they call) are left out of the image by
# Zephyr's --gc-sections.
set(_cmnn_registration --output-dir "${_cmnn_generated}")
if(NOT CONFIG_CORTEX_M_NN_ALL_KERNELS)
  string(REPLACE ";" "," _cmnn_only "${CORTEX_M_NN_IMAGE_CASES}")
  list(APPEND _cmnn_registration --only "${_cmnn_only}")
endif()
if(CORTEX_M_NN_IMAGE_PRIM_OPERATORS)
  string(REPLACE ";" "," _cmnn_prims "${CORTEX_M_NN_IMAGE_PRIM_OPERATORS}")
  list(APPEND _cmnn_registration --prim-operators "${_cmnn_prims}")
endif()
_cmnn_run("generating the kernel registration" ${_cmnn_python} -m cortex_m_nn.embed.kernel_codegen
          ${_cmnn_registration})

zephyr_library_named(cortex_m_nn)
# Each case in a section of its own, so the link (Zephyr's --gc-sections; it links libraries
# whole) drops the cases the registration does not reference, whatever the application's flags.
zephyr_library_compile_options(-ffunction-sections -fdata-sections)
# The kernels the image calls and, with a stage, those its steps call directly.
foreach(_cmnn_kernel IN LISTS CORTEX_M_NN_IMAGE_KERNEL_SOURCES)
  zephyr_library_sources("${CORTEX_M_NN_ROOT}/kernels/op_${_cmnn_kernel}.cpp")
endforeach()
# The kernels' support and the API (cmake/sources.cmake). The kernels' support includes our own
# compute functions (cortex_m_nn/compute.h), which kernel cases call in place of a CMSIS-NN
# function: all compiled, each in a section of its own, so the link keeps only those a
# registered case calls.
include("${CORTEX_M_NN_ROOT}/cmake/sources.cmake")
foreach(_cmnn_source IN LISTS CORTEX_M_NN_KERNEL_SUPPORT_SOURCES CORTEX_M_NN_API_SOURCES)
  zephyr_library_sources("${CORTEX_M_NN_ROOT}/${_cmnn_source}")
endforeach()
zephyr_library_sources("${_cmnn_generated}/cortex_m_nn_register.cpp")
if(CONFIG_CORTEX_M_NN_EMBEDDED_MODEL)
  zephyr_library_sources("${_cmnn_out}/cortex_m_nn_model.c")
  foreach(_cmnn_source IN LISTS CORTEX_M_NN_EMBEDDED_SOURCES)
    zephyr_library_sources("${CORTEX_M_NN_ROOT}/${_cmnn_source}")
  endforeach()
endif()
if(CONFIG_CORTEX_M_NN_MODEL_PARTITION)
  zephyr_library_sources("${CORTEX_M_NN_ROOT}/src/flash_partition.cpp")
endif()
zephyr_library_include_directories("${CORTEX_M_NN_ROOT}/kernels/include" "${_cmnn_generated}")
# The application includes <cortex_m_nn/model.h>, cortex_m_nn_model.h (the sizes), with
# CONFIG_CORTEX_M_NN_TEST_VECTOR cortex_m_nn_test_vector.h, and with programs loaded at run
# time cortex_m_nn_programs.h.
zephyr_include_directories("${CORTEX_M_NN_ROOT}/include" "${_cmnn_out}")
if(CONFIG_CORTEX_M_NN_TEMP_ALLOCATOR_SIZE GREATER 0)
  zephyr_library_compile_definitions(
    CORTEX_M_NN_TEMP_ALLOCATOR_BYTES=${CONFIG_CORTEX_M_NN_TEMP_ALLOCATOR_SIZE})
endif()

# CMSIS-NN functions our kernels call that Zephyr's modules/cmsis-nn library does not build
# (it has no group for them): compiled here from the same checkout.
set(_cmnn_extra_cmsis_nn)
if("pad" IN_LIST CORTEX_M_NN_IMAGE_KERNELS)
  list(APPEND _cmnn_extra_cmsis_nn PadFunctions/arm_pad_s8.c)
endif()
if("lstm" IN_LIST CORTEX_M_NN_IMAGE_KERNELS)
  # CONFIG_CMSIS_NN_LSTM builds LSTMFunctions/*_s16.c only: the int8 LSTM is ours to add
  list(APPEND _cmnn_extra_cmsis_nn LSTMFunctions/arm_lstm_unidirectional_s8.c)
endif()
if("transpose" IN_LIST CORTEX_M_NN_IMAGE_KERNELS AND NOT CONFIG_CMSIS_NN_TRANSPOSE)
  list(APPEND _cmnn_extra_cmsis_nn TransposeFunctions/arm_transpose_s8.c)
endif()
foreach(_cmnn_file IN LISTS _cmnn_extra_cmsis_nn)
  set(_cmnn_path "${ZEPHYR_CMSIS_NN_MODULE_DIR}/Source/${_cmnn_file}")
  if(NOT EXISTS "${_cmnn_path}")
    message(FATAL_ERROR "cortex-m-nn: the model needs ${_cmnn_file}, which this workspace's "
                        "CMSIS-NN (${ZEPHYR_CMSIS_NN_MODULE_DIR}) does not have: update cmsis-nn")
  endif()
  zephyr_library_sources("${_cmnn_path}")
endforeach()

# --- 5. where the model and the arena go -------------------------------------------------------

if(NOT CONFIG_CORTEX_M_NN_EMBEDDED_MODEL)
  # nothing to place: a run-time model's memory is the application's (cortex_m_nn::ModelMemory)
elseif(NOT "${CONFIG_CORTEX_M_NN_MODEL_MEMORY}" STREQUAL "")
  set(CORTEX_M_NN_MODEL_NODELABEL "${CONFIG_CORTEX_M_NN_MODEL_MEMORY}")
  configure_file("${CORTEX_M_NN_ROOT}/cmake/model_region.ld.in" "${_cmnn_out}/model_region.ld"
                 @ONLY)
  zephyr_linker_sources(SECTIONS "${_cmnn_out}/model_region.ld")
else()
  zephyr_linker_sources(ROM_SECTIONS "${CORTEX_M_NN_ROOT}/cmake/model_rom.ld")
endif()
if(NOT "${CONFIG_CORTEX_M_NN_ARENA_MEMORY}" STREQUAL "")
  zephyr_library_compile_definitions(CORTEX_M_NN_ARENA_NODELABEL=${CONFIG_CORTEX_M_NN_ARENA_MEMORY})
endif()

# --- 6. the ExecuTorch runtime (cmake/zephyr_executorch.cmake) ---------------------------------
include("${CORTEX_M_NN_ROOT}/cmake/zephyr_executorch.cmake")

# --- 7. ExecuTorch's portable kernels for what is not ours ---------------------------------------
if(CORTEX_M_NN_MODEL_FALLBACK_OPERATORS)
  include("${CORTEX_M_NN_ROOT}/cmake/portable_fallbacks.cmake")
elseif(CONFIG_EXECUTORCH_BUILD_PORTABLE_OPS)
  message(WARNING
    "cortex-m-nn: the model runs only cortex_m_nn kernels, but "
    "CONFIG_EXECUTORCH_BUILD_PORTABLE_OPS=y links every ExecuTorch portable operator: set "
    "CONFIG_EXECUTORCH_BUILD_PORTABLE_OPS=n to leave them out")
endif()
