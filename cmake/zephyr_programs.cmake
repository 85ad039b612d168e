# cortex-m-nn: the programs a Zephyr image loads at run time (docs/program-image.md), step 3
# of cmake/zephyr_module.cmake, included with CONFIG_CORTEX_M_NN_LOADS_PROGRAMS=y after the
# embedded model's step (if any) set the CORTEX_M_NN_IMAGE_* lists it extends.
#
#  - CONFIG_CORTEX_M_NN_PROGRAMS: the .pte files (or models compiled here, with
#    CONFIG_CORTEX_M_NN_PROGRAMS_TEST_VECTORS each with <name>_test_vector.h); refused by
#    cortex_m_nn.embed.programs if these
#    kernels cannot run or (CONFIG_CORTEX_M_NN_MODEL_PARTITION) the partition cannot hold,
#    writes each one's program image (<name>.cmnn: what goes into the partition) and
#    cortex_m_nn_programs.h (the memory a model needs to run any of them), and gives the
#    kernels and cases they call, added to the image's;
#  - CONFIG_CORTEX_M_NN_ALL_KERNELS: every kernel and case instead;
#  - CONFIG_CORTEX_M_NN_MODEL_PARTITION: the partition's size and place, from the devicetree.
#
# Sets CORTEX_M_NN_PROGRAMS_DIR (a cache entry, so the application's CMakeLists.txt sees it):
# where the images and cortex_m_nn_programs.h are.

set(_cmnn_programs_dir "${_cmnn_out}/programs")
set(CORTEX_M_NN_PROGRAMS_DIR "${_cmnn_programs_dir}" CACHE INTERNAL
    "cortex-m-nn: the program images and cortex_m_nn_programs.h of this build")

# Each entry: a .pte, or a model compiled here for the image's target (a built-in name,
# file.pt2, path/file.py:factory), named after the name, the file or the factory.
set(_cmnn_programs)
string(REPLACE " " ";" _cmnn_listed "${CONFIG_CORTEX_M_NN_PROGRAMS}")
foreach(_cmnn_program IN LISTS _cmnn_listed)
  if("${_cmnn_program}" STREQUAL "")
    continue()
  elseif(_cmnn_program MATCHES "\\.pte$")
    _cmnn_path(_cmnn_program "${_cmnn_program}")
  else()
    string(REGEX REPLACE "^.*:" "" _cmnn_name "${_cmnn_program}")  # path/file.py:factory
    get_filename_component(_cmnn_name "${_cmnn_name}" NAME_WE)     # file.pt2, a name
    set(_cmnn_options)
    if(CONFIG_CORTEX_M_NN_PROGRAMS_TEST_VECTORS)
      set(_cmnn_options --test-vector "${_cmnn_programs_dir}/${_cmnn_name}_test_vector.h")
    endif()
    set(_cmnn_pte "${_cmnn_programs_dir}/compiled/${_cmnn_name}.pte")
    _cmnn_compile("${_cmnn_program}" "${_cmnn_pte}" OPTIONS ${_cmnn_options})
    set(_cmnn_program "${_cmnn_pte}")
  endif()
  list(APPEND _cmnn_programs "${_cmnn_program}")
endforeach()
if(NOT _cmnn_programs AND NOT CONFIG_CORTEX_M_NN_ALL_KERNELS
   AND NOT CONFIG_CORTEX_M_NN_EMBEDDED_MODEL)
  message(FATAL_ERROR "cortex-m-nn: the image embeds no model and names no program to load, so "
                      "it would register no kernel: list the .pte files it loads in "
                      "CONFIG_CORTEX_M_NN_PROGRAMS, or set CONFIG_CORTEX_M_NN_ALL_KERNELS=y")
endif()

set(_cmnn_programs_args --output-dir "${_cmnn_programs_dir}" --target ${_cmnn_target}
    --rounding ${_cmnn_rounding} --method-margin ${CONFIG_CORTEX_M_NN_METHOD_ALLOCATOR_MARGIN})
if(CONFIG_CORTEX_M_NN_ALL_KERNELS)
  list(APPEND _cmnn_programs_args --all-kernels)
endif()

if(CONFIG_CORTEX_M_NN_MODEL_PARTITION)
  set(_cmnn_label "${CONFIG_CORTEX_M_NN_MODEL_PARTITION_LABEL}")
  dt_nodelabel(_cmnn_partition NODELABEL "${_cmnn_label}")
  if(NOT DEFINED _cmnn_partition)
    message(FATAL_ERROR "cortex-m-nn: no devicetree node is labelled '${_cmnn_label}' "
                        "(CONFIG_CORTEX_M_NN_MODEL_PARTITION_LABEL): add a partition to a "
                        "fixed-partitions node in an overlay (docs/zephyr.md, \"Models as data\")")
  endif()
  dt_reg_addr(_cmnn_partition_offset PATH "${_cmnn_partition}")
  dt_reg_size(_cmnn_partition_bytes PATH "${_cmnn_partition}")
  math(EXPR _cmnn_partition_bytes "${_cmnn_partition_bytes}" OUTPUT_FORMAT DECIMAL)
  math(EXPR _cmnn_partition_offset "${_cmnn_partition_offset}" OUTPUT_FORMAT HEXADECIMAL)
  list(APPEND _cmnn_programs_args --partition "${_cmnn_label}"
       --partition-bytes ${_cmnn_partition_bytes})
  message(STATUS "cortex-m-nn: programs go into ${_cmnn_partition} (offset "
                 "${_cmnn_partition_offset} of its flash, ${_cmnn_partition_bytes} B)")
endif()

_cmnn_run("preparing the programs the image loads" ${_cmnn_python} -m cortex_m_nn.embed.programs
          ${_cmnn_programs_args} ${_cmnn_programs})
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${_cmnn_programs})
include("${_cmnn_programs_dir}/cortex_m_nn_programs.cmake")

foreach(_cmnn_kind KERNELS KERNEL_SOURCES CASES PRIM_OPERATORS)
  list(APPEND CORTEX_M_NN_IMAGE_${_cmnn_kind} ${CORTEX_M_NN_PROGRAMS_${_cmnn_kind}})
  list(REMOVE_DUPLICATES CORTEX_M_NN_IMAGE_${_cmnn_kind})
endforeach()
zephyr_include_directories("${_cmnn_programs_dir}")
foreach(_cmnn_image IN LISTS CORTEX_M_NN_PROGRAMS_IMAGES)
  message(STATUS "cortex-m-nn: program image ${_cmnn_image}")
endforeach()
