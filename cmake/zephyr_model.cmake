# cortex-m-nn: the model embedded in a Zephyr image (steps 2 and 3 of cmake/zephyr_module.cmake,
# which includes this file with CONFIG_CORTEX_M_NN_EMBEDDED_MODEL=y, after choosing the target
# and the Python). Sets the model's CORTEX_M_NN_MODEL_* variables (cortex_m_nn_model.cmake) and
# _cmnn_pte.

# --- 2. the model -----------------------------------------------------------------------------

if(NOT "${CONFIG_CORTEX_M_NN_MODEL_PTE}" STREQUAL "")
  _cmnn_prebuilt(_cmnn_pte CONFIG_CORTEX_M_NN_MODEL_PTE "${CONFIG_CORTEX_M_NN_MODEL_PTE}")
elseif(NOT "${CONFIG_CORTEX_M_NN_MODEL_SOURCE}" STREQUAL "")
  set(_cmnn_pte "${_cmnn_out}/model.pte")
  set(_cmnn_options --report-json "${_cmnn_out}/model_report.json")
  set(_cmnn_inputs)
  if(NOT "${CONFIG_CORTEX_M_NN_MODEL_CALIBRATION}" STREQUAL "")
    _cmnn_path(_cmnn_calibration "${CONFIG_CORTEX_M_NN_MODEL_CALIBRATION}")
    list(APPEND _cmnn_options --calibration "${_cmnn_calibration}")
    list(APPEND _cmnn_inputs "${_cmnn_calibration}")
  endif()
  if(CONFIG_CORTEX_M_NN_MODEL_ALLOW_FALLBACK)
    list(APPEND _cmnn_options --allow-fallback)
  endif()
  if(CONFIG_CORTEX_M_NN_MODEL_IO_INT8)
    list(APPEND _cmnn_options --io int8)
  endif()
  if(CONFIG_CORTEX_M_NN_TEST_VECTOR)
    list(APPEND _cmnn_options --test-vector "${_cmnn_out}/cortex_m_nn_test_vector.h")
  endif()
  _cmnn_compile("${CONFIG_CORTEX_M_NN_MODEL_SOURCE}" "${_cmnn_pte}" OPTIONS ${_cmnn_options}
                INPUTS ${_cmnn_inputs})
else()
  message(FATAL_ERROR "cortex-m-nn: no model: set CONFIG_CORTEX_M_NN_MODEL_PTE=\"model.pte\" or "
                      "CONFIG_CORTEX_M_NN_MODEL_SOURCE=\"ds_cnn\" (or path/model.py:factory)")
endif()

# --- 3. embed, after checking the memories ------------------------------------------------------

# The size and linker region of the memory a devicetree node label names.
function(_cmnn_memory label size_out region_out)
  dt_nodelabel(path NODELABEL "${label}")
  if(NOT DEFINED path)
    message(FATAL_ERROR "cortex-m-nn: no devicetree node is labelled '${label}'; name a node "
                        "with compatible \"zephyr,memory-region\" (boards/ has examples)")
  endif()
  dt_prop(region PATH "${path}" PROPERTY "zephyr,memory-region")
  if(NOT DEFINED region)
    message(FATAL_ERROR "cortex-m-nn: devicetree node '${label}' (${path}) has no "
                        "zephyr,memory-region property, so the linker has no region for it; add "
                        "one in an overlay (boards/ has examples)")
  endif()
  dt_reg_size(size PATH "${path}")
  math(EXPR size "${size}" OUTPUT_FORMAT DECIMAL)  # the devicetree gives hexadecimal
  string(MAKE_C_IDENTIFIER "${region}" region)
  set(${size_out} ${size} PARENT_SCOPE)
  set(${region_out} ${region} PARENT_SCOPE)
endfunction()

# The size and a name of the memory a /chosen property names (zephyr,flash, zephyr,sram).
function(_cmnn_chosen property size_out name_out)
  dt_chosen(path PROPERTY "${property}")
  if(NOT DEFINED path)
    set(${size_out} "" PARENT_SCOPE)
    return()
  endif()
  dt_reg_size(size PATH "${path}")
  math(EXPR size "${size}" OUTPUT_FORMAT DECIMAL)
  dt_prop(name PATH "${path}" PROPERTY "zephyr,memory-region")
  if(NOT DEFINED name)
    get_filename_component(name "${path}" NAME)  # /soc/mram@80000000 -> mram
    string(REGEX REPLACE "@.*" "" name "${name}")
    string(TOUPPER "${name}" name)
  endif()
  set(${size_out} ${size} PARENT_SCOPE)
  set(${name_out} "${name}" PARENT_SCOPE)
endfunction()

set(_cmnn_embed "${_cmnn_pte}" --output-dir "${_cmnn_out}" -q
    --method-margin ${CONFIG_CORTEX_M_NN_METHOD_ALLOCATOR_MARGIN})
if(NOT "${CONFIG_CORTEX_M_NN_MODEL_MEMORY}" STREQUAL "")
  _cmnn_memory("${CONFIG_CORTEX_M_NN_MODEL_MEMORY}" _cmnn_model_size CORTEX_M_NN_MODEL_REGION)
  list(APPEND _cmnn_embed --flash ${_cmnn_model_size} --flash-region ${CORTEX_M_NN_MODEL_REGION}
       --model-alone)
else()
  _cmnn_chosen("zephyr,flash" _cmnn_model_size _cmnn_model_name)
  if(_cmnn_model_size)
    list(APPEND _cmnn_embed --flash ${_cmnn_model_size} --flash-region ${_cmnn_model_name})
  endif()
endif()
if(NOT "${CONFIG_CORTEX_M_NN_ARENA_MEMORY}" STREQUAL "")
  _cmnn_memory("${CONFIG_CORTEX_M_NN_ARENA_MEMORY}" _cmnn_arena_size _cmnn_arena_region)
  list(APPEND _cmnn_embed --ram ${_cmnn_arena_size} --ram-region ${_cmnn_arena_region}
       --arena-alone)
else()
  _cmnn_chosen("zephyr,sram" _cmnn_arena_size _cmnn_arena_name)
  if(_cmnn_arena_size)
    list(APPEND _cmnn_embed --ram ${_cmnn_arena_size} --ram-region ${_cmnn_arena_name})
  endif()
endif()
if(NOT CONFIG_CORTEX_M_NN_FIT_CHECK)
  # Sizes only name the memories; drop them so nothing is checked.
  set(_cmnn_embed "${_cmnn_pte}" --output-dir "${_cmnn_out}" -q
      --method-margin ${CONFIG_CORTEX_M_NN_METHOD_ALLOCATOR_MARGIN})
else()
  # A board the fit check knows also gets suggestions of where else things could go.
  execute_process(
    COMMAND ${_cmnn_python} -c
            "import sys; from cortex_m_nn.plan.boards import find_board; find_board(sys.argv[1])"
            "${BOARD}${BOARD_QUALIFIERS}"
    RESULT_VARIABLE _cmnn_unknown_board OUTPUT_QUIET ERROR_QUIET)
  if(_cmnn_unknown_board EQUAL 0)
    list(APPEND _cmnn_embed --board "${BOARD}${BOARD_QUALIFIERS}")
  endif()
endif()
_cmnn_run("cortex-m-compile embed (does the model fit ${BOARD}${BOARD_QUALIFIERS}?)"
          ${_cmnn_cli} embed ${_cmnn_embed})
include("${_cmnn_out}/cortex_m_nn_model.cmake")

# The kernel ABI (ISA, rounding, operator version) is named once, in C++:
# kernels/include/cortex_m_nn/abi.h, from the compiler flags the build gives CMSIS-NN.
# src/model.cpp checks at compile time that the Kconfig ISA and the embedded model's
# cortex_m_nn_model.h (CORTEX_M_NN_MODEL_ISA, _ROUNDING, _OPS_VERSION) equal it, and
# check_program_abi() checks the program itself when it is loaded. Here, before anything is
# compiled, only the Kconfig choice is compared with what the model was compiled for, so a
# mismatch fails at configure time with the cortex-m-compile options that fix it.
if(NOT CORTEX_M_NN_MODEL_CORE STREQUAL _cmnn_core
   OR NOT CORTEX_M_NN_MODEL_ISA STREQUAL _cmnn_isa
   OR NOT CORTEX_M_NN_MODEL_ROUNDING STREQUAL _cmnn_rounding)
  message(FATAL_ERROR
    "cortex-m-nn: the model was compiled for ${CORTEX_M_NN_MODEL_CORE}+${CORTEX_M_NN_MODEL_ISA} "
    "with ${CORTEX_M_NN_MODEL_ROUNDING} rounding, but this build is ${_cmnn_target} with "
    "${_cmnn_rounding} rounding: recompile it with cortex-m-compile --target ${_cmnn_target} "
    "--rounding ${_cmnn_rounding}")
endif()
message(STATUS "cortex-m-nn: model ${CORTEX_M_NN_MODEL_BYTES} B, arena ${CORTEX_M_NN_ARENA_BYTES} "
               "B, method allocator ${CORTEX_M_NN_METHOD_ALLOCATOR_BYTES} B; kernel cases: "
               "${CORTEX_M_NN_MODEL_CASES}")
