# cortex-m-nn: running this tree's Python package from CMake, shared by the Zephyr module
# (cmake/zephyr_module.cmake) and the CMake package (cmake/cortex_m_nn.cmake).
#
#   _cmnn_run(<what> <command>...)      run a step; on failure its last stderr line, then all
#   _cmnn_path(<out> <value>)           a path relative to _cmnn_base_dir (the application's)
#   _cmnn_find_python(<out> NEEDS <modules>... INSTALL <command> [LAST <python>] [HINT <text>])
#
# _cmnn_find_python takes the first candidate that finds every module of NEEDS with this tree's
# python/ first on its path (finding, not importing: importing torch is slow):
#  1. CORTEX_M_NN_PYTHON (-D, or the environment variable): when given, the only candidate;
#  2. the Python of the cortex-m-compile on PATH (its launcher's #! line);
#  3. the active virtual environment's (VIRTUAL_ENV);
#  4. LAST (Zephyr's PYTHON_EXECUTABLE, or CMake's Python3_EXECUTABLE).
# None: one line naming what each lacked, INSTALL (how to give one the modules), how to name
# one, then HINT.
include_guard(GLOBAL)

function(_cmnn_run what)
  execute_process(
    COMMAND ${ARGN}
    RESULT_VARIABLE result
    OUTPUT_VARIABLE output
    ERROR_VARIABLE errors)
  if(NOT result EQUAL 0)
    string(STRIP "${errors}" errors)
    string(REGEX REPLACE ".*\n" "" last_line "${errors}")
    message(FATAL_ERROR "cortex-m-nn: ${what} failed: ${last_line}\n(full output:\n${errors})")
  endif()
  string(STRIP "${output}" output)
  if(output)
    message(STATUS "cortex-m-nn: ${output}")
  endif()
endfunction()

function(_cmnn_path out value)
  if(IS_ABSOLUTE "${value}")
    set(${out} "${value}" PARENT_SCOPE)
  else()
    get_filename_component(path "${value}" ABSOLUTE BASE_DIR "${_cmnn_base_dir}")
    set(${out} "${path}" PARENT_SCOPE)
  endif()
endfunction()

set(CORTEX_M_NN_PYTHON "$ENV{CORTEX_M_NN_PYTHON}" CACHE FILEPATH
    "Python that runs cortex-m-compile (empty: cortex-m-compile's, the virtual environment's, \
the build system's)")

# The interpreter a pip-generated launcher runs: `#!<python>`, or for long paths `#!/bin/sh`
# followed by `'''exec' "<python>" "$0" "$@"`.
function(_cmnn_launcher_python script out)
  file(STRINGS "${script}" head LIMIT_COUNT 2)
  set(found)
  if(head MATCHES "^#![ ]*([^ ;]+)")
    set(found "${CMAKE_MATCH_1}")
  endif()
  if(found MATCHES "/sh$" AND head MATCHES "exec' \"([^\"]+)\"")
    set(found "${CMAKE_MATCH_1}")
  endif()
  if(found AND EXISTS "${found}" AND NOT found MATCHES "/sh$")
    set(${out} "${found}" PARENT_SCOPE)
  endif()
endfunction()

function(_cmnn_find_python out)
  cmake_parse_arguments(A "" "LAST;HINT;INSTALL" "NEEDS" ${ARGN})
  if(NOT "${CORTEX_M_NN_PYTHON}" STREQUAL "")
    set(candidates "${CORTEX_M_NN_PYTHON}")
  else()
    set(candidates)
    find_program(launcher cortex-m-compile NO_CACHE)
    if(launcher)
      _cmnn_launcher_python("${launcher}" candidate)
      list(APPEND candidates ${candidate})
    endif()
    foreach(candidate "$ENV{VIRTUAL_ENV}/bin/python" "$ENV{VIRTUAL_ENV}/Scripts/python.exe")
      if(DEFINED ENV{VIRTUAL_ENV} AND EXISTS "${candidate}")
        list(APPEND candidates "${candidate}")
      endif()
    endforeach()
    list(APPEND candidates ${A_LAST})
    list(REMOVE_DUPLICATES candidates)
  endif()
  string(REPLACE ";" "', '" needed "'${A_NEEDS}'")
  set(tried)
  foreach(candidate IN LISTS candidates)
    execute_process(
      COMMAND ${CMAKE_COMMAND} -E env "PYTHONPATH=${CORTEX_M_NN_ROOT}/python" ${candidate}
              -c "import importlib.util as u, sys; missing = [m for m in (${needed}) \
if u.find_spec(m) is None]; print(', '.join(missing)); sys.exit(1 if missing else 0)"
      RESULT_VARIABLE status
      OUTPUT_VARIABLE missing
      ERROR_VARIABLE missing
      OUTPUT_STRIP_TRAILING_WHITESPACE)
    if(status EQUAL 0)
      message(STATUS "cortex-m-nn: Python ${candidate}")
      set(${out} "${candidate}" PARENT_SCOPE)
      return()
    endif()
    string(REGEX REPLACE "\n.*" "" missing "${missing}")
    list(APPEND tried "${candidate} (missing: ${missing})")
  endforeach()
  string(REPLACE ";" ", " tried "${tried}")
  message(FATAL_ERROR
    "cortex-m-nn: no Python here can run cortex-m-compile (tried ${tried}): install "
    "cortex-m-nn into one (${A_INSTALL}) or name one with "
    "-DCORTEX_M_NN_PYTHON=<python> (or the CORTEX_M_NN_PYTHON environment variable)${A_HINT}")
endfunction()
