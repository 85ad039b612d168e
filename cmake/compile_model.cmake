# cortex-m-nn: compiling a model at configure time for the image's target (included by
# cmake/zephyr_module.cmake, for the embedded model and programs loaded at run time, and by the
# CMake package, cmake/cortex_m_nn.cmake). Needs cmake/python_steps.cmake and the includer's
# _cmnn_target, _cmnn_rounding and _cmnn_cli (the command that runs cortex-m-compile).
#
#   _cmnn_compile(<source> <pte> [OPTIONS <cortex-m-compile options>...] [INPUTS <files>...])
#   _cmnn_prebuilt(<out> <setting> <path>)
#
# <source>: a built-in model name (ds_cnn), file.pt2 or path/file.py:factory (paths relative to
# _cmnn_base_dir, the application's directory). Runs cortex-m-compile for the target this
# configuration gives (_cmnn_target, _cmnn_rounding), again only when the command, the model's
# file, an INPUTS file or the compiler itself changed (a stamp beside <pte> keeps the hash of
# all of them).
function(_cmnn_compile source pte)
  cmake_parse_arguments(A "" "" "OPTIONS;INPUTS" ${ARGN})
  set(inputs ${A_INPUTS})
  set(resolved "${source}")
  if(source MATCHES "^(.+\\.py):([A-Za-z_][A-Za-z0-9_]*)$")
    _cmnn_path(file "${CMAKE_MATCH_1}")
    set(resolved "${file}:${CMAKE_MATCH_2}")
    list(APPEND inputs "${file}")
  elseif(source MATCHES "[./]")
    _cmnn_path(resolved "${source}")
    list(APPEND inputs "${resolved}")
  endif()
  set(command ${resolved} --target ${_cmnn_target} --rounding ${_cmnn_rounding} -o "${pte}" -q
      ${A_OPTIONS})
  file(GLOB_RECURSE compiler "${CORTEX_M_NN_ROOT}/python/cortex_m_nn/*.py"
       "${CORTEX_M_NN_ROOT}/python/cortex_m_nn/*.yaml")
  list(SORT compiler)
  set(key "${command}")
  foreach(file IN LISTS inputs compiler)
    if(EXISTS "${file}")
      file(SHA256 "${file}" hash)
      string(APPEND key ";${hash}")
    endif()
  endforeach()
  string(SHA256 key "${key}")
  set(stamp "${pte}.stamp")
  set(previous "")
  if(EXISTS "${stamp}" AND EXISTS "${pte}")
    file(READ "${stamp}" previous)
  endif()
  if(NOT previous STREQUAL key)
    message(STATUS "cortex-m-nn: compiling ${source} for ${_cmnn_target}")
    file(REMOVE "${stamp}")
    _cmnn_run("cortex-m-compile ${source}" ${_cmnn_cli} ${command})
    file(WRITE "${stamp}" "${key}")
  endif()
  set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${inputs} ${compiler})
endfunction()

# A .pte compiled elsewhere, named by <setting> (relative to _cmnn_base_dir): its path in <out>,
# refused in one line when it does not exist; the configuration runs again when it changes.
function(_cmnn_prebuilt out setting value)
  _cmnn_path(pte "${value}")
  if(NOT EXISTS "${pte}")
    message(FATAL_ERROR "cortex-m-nn: ${setting}: ${pte} does not exist; compile it with "
                        "cortex-m-compile <model> --target ${_cmnn_target} -o ${value}")
  endif()
  set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS "${pte}")
  set(${out} "${pte}" PARENT_SCOPE)
endfunction()
