# A stand-in for Zephyr's CMake package (ZEPHYR_BASE/share/zephyr-package/cmake), found by an
# application's own `find_package(Zephyr REQUIRED HINTS $ENV{ZEPHYR_BASE})` when ZEPHYR_BASE
# names tests/zephyr/zephyr_package. It does, in Zephyr's order, what the module build depends
# on, with real targets so that CMake configures *and generates* the build:
#  1. Kconfig: every CONFIG_* value of STAND_IN_DOTCONFIG (a .config from kconfiglib), read the
#     way Zephyr's import_kconfig reads them (quotes stripped, unset symbols absent);
#  2. the toolchain: arm-none-eabi-gcc for STAND_IN_CPU_FLAGS, libraries only (no Zephyr kernel
#     to link against), as Zephyr sets CMAKE_TRY_COMPILE_TARGET_TYPE;
#  3. zephyr_interface (STAND_IN_COMPILE_OPTIONS for every file, STAND_IN_C_OPTIONS and
#     STAND_IN_CXX_OPTIONS per language, STAND_IN_INCLUDE_DIRECTORIES) and the zephyr_*
#     library functions (cmake/modules/extensions.cmake): static libraries linking it;
#  4. the modules of STAND_IN_MODULES (name=directory, in build.depends order), each
#     add_subdirectory'd from its build.cmake directory with ZEPHYR_CURRENT_MODULE_DIR and
#     ZEPHYR_<NAME>_MODULE_DIR set, as Zephyr's modules/CMakeLists.txt does; cmsis-nn's
#     module CMake is Zephyr's own (modules/cmsis-nn), so a small stand-in of it is here;
#  5. the `app` library the application adds its sources to.
# The devicetree comes from STUB_DT_* variables (tests/zephyr/cmake_stand_in/devicetree.cmake).
# Nothing is compiled unless a test builds a library target; nothing is linked.
cmake_minimum_required(VERSION 3.20)

get_filename_component(ZEPHYR_BASE "${CMAKE_CURRENT_LIST_DIR}/../../.." ABSOLUTE)
set(_stand_in_tests "${ZEPHYR_BASE}/..")
set(APPLICATION_SOURCE_DIR "${CMAKE_CURRENT_SOURCE_DIR}")  # the application calling find_package

# --- 1. Kconfig --------------------------------------------------------------------------------
if(NOT STAND_IN_DOTCONFIG OR NOT EXISTS "${STAND_IN_DOTCONFIG}")
  message(FATAL_ERROR "Zephyr stand-in: STAND_IN_DOTCONFIG must name a .config")
endif()
file(STRINGS "${STAND_IN_DOTCONFIG}" _stand_in_lines REGEX "^CONFIG_[A-Za-z0-9_]+=")
foreach(_line IN LISTS _stand_in_lines)
  string(REGEX MATCH "^(CONFIG_[A-Za-z0-9_]+)=(.*)$" _ "${_line}")
  set(_symbol "${CMAKE_MATCH_1}")
  set(_value "${CMAKE_MATCH_2}")
  if(_value MATCHES "^\"(.*)\"$")
    set(_value "${CMAKE_MATCH_1}")
  endif()
  set(${_symbol} "${_value}")
endforeach()

# --- 2. the toolchain --------------------------------------------------------------------------
set(CMAKE_SYSTEM_NAME Generic)
set(CMAKE_SYSTEM_PROCESSOR arm)
set(CMAKE_C_COMPILER arm-none-eabi-gcc)
set(CMAKE_CXX_COMPILER arm-none-eabi-g++)
set(CMAKE_ASM_COMPILER arm-none-eabi-gcc)
set(CMAKE_TRY_COMPILE_TARGET_TYPE STATIC_LIBRARY)
project(Zephyr-Kernel-Stand-In LANGUAGES C CXX ASM)

# --- 3. zephyr_interface and the library functions ---------------------------------------------
add_library(zephyr_interface INTERFACE)
target_compile_options(zephyr_interface INTERFACE ${STAND_IN_CPU_FLAGS} -mthumb
  ${STAND_IN_COMPILE_OPTIONS} $<$<COMPILE_LANGUAGE:C>:${STAND_IN_C_OPTIONS}>
  $<$<COMPILE_LANGUAGE:CXX>:${STAND_IN_CXX_OPTIONS}>)
target_include_directories(zephyr_interface INTERFACE ${STAND_IN_INCLUDE_DIRECTORIES})
set_property(GLOBAL PROPERTY ZEPHYR_LIBS)

function(zephyr_append_cmake_library library)
  set_property(GLOBAL APPEND PROPERTY ZEPHYR_LIBS ${library})
endfunction()
macro(zephyr_library_named name)
  set(ZEPHYR_CURRENT_LIBRARY ${name})
  add_library(${name} STATIC "")
  zephyr_append_cmake_library(${name})
  target_link_libraries(${name} PUBLIC zephyr_interface)
endmacro()
macro(zephyr_library)
  string(MAKE_C_IDENTIFIER "${CMAKE_CURRENT_SOURCE_DIR}" _stand_in_name)
  string(MD5 _stand_in_name "${_stand_in_name}")
  zephyr_library_named(lib_${_stand_in_name})
endmacro()
function(zephyr_library_sources)
  target_sources(${ZEPHYR_CURRENT_LIBRARY} PRIVATE ${ARGN})
endfunction()
function(zephyr_library_include_directories)
  target_include_directories(${ZEPHYR_CURRENT_LIBRARY} PRIVATE ${ARGN})
endfunction()
function(zephyr_library_compile_definitions)
  target_compile_definitions(${ZEPHYR_CURRENT_LIBRARY} PRIVATE ${ARGN})
endfunction()
function(zephyr_library_compile_options)
  target_compile_options(${ZEPHYR_CURRENT_LIBRARY} PRIVATE ${ARGN})
endfunction()
function(zephyr_library_link_libraries)
  target_link_libraries(${ZEPHYR_CURRENT_LIBRARY} PUBLIC ${ARGN})
endfunction()
function(zephyr_include_directories)
  target_include_directories(zephyr_interface INTERFACE ${ARGN})
endfunction()
function(zephyr_compile_definitions)
  target_compile_definitions(zephyr_interface INTERFACE ${ARGN})
endfunction()
function(zephyr_linker_sources location)
  set_property(GLOBAL APPEND PROPERTY STAND_IN_LINKER_SOURCES "${location}:${ARGN}")
endfunction()
include("${_stand_in_tests}/cmake_stand_in/devicetree.cmake")
# Zephyr's build directory, whose include/generated is on every target's include path
# (ZEPHYR_BINARY_DIR, zephyr/CMakeLists.txt), and generate_inc_file_for_target
# (cmake/modules/extensions.cmake, section 1.3): a file's bytes as a C initialiser, which
# Zephyr writes with scripts/build/file2hex.py ("0x..," items), at build time.
set(ZEPHYR_BINARY_DIR "${CMAKE_BINARY_DIR}/zephyr")
file(MAKE_DIRECTORY "${ZEPHYR_BINARY_DIR}/include/generated")
target_include_directories(zephyr_interface INTERFACE "${ZEPHYR_BINARY_DIR}/include/generated")
function(generate_inc_file_for_target target source_file generated_file)
  string(MAKE_C_IDENTIFIER "${generated_file}" name)
  add_custom_command(OUTPUT "${generated_file}"
    COMMAND "${PYTHON_EXECUTABLE}" "${ZEPHYR_BASE}/scripts/build/file2hex.py" "${source_file}"
            "${generated_file}"
    DEPENDS "${source_file}" VERBATIM)
  add_custom_target(gen_${name} DEPENDS "${generated_file}")
  add_dependencies(${target} gen_${name})
endfunction()

# --- 4. the modules ----------------------------------------------------------------------------
foreach(_module IN LISTS STAND_IN_MODULES)
  string(REGEX MATCH "^([^=]+)=(.*)$" _ "${_module}")
  set(_name "${CMAKE_MATCH_1}")
  set(_dir "${CMAKE_MATCH_2}")
  string(MAKE_C_IDENTIFIER "${_name}" _upper)
  string(TOUPPER "${_upper}" _upper)
  set(ZEPHYR_${_upper}_MODULE_DIR "${_dir}")
endforeach()
foreach(_module IN LISTS STAND_IN_MODULES)
  string(REGEX MATCH "^([^=]+)=(.*)$" _ "${_module}")
  set(_name "${CMAKE_MATCH_1}")
  set(ZEPHYR_CURRENT_MODULE_DIR "${CMAKE_MATCH_2}")
  if(_name STREQUAL "cmsis-nn")
    set(_cmake_dir "${_stand_in_tests}/zephyr_package/modules/cmsis-nn")
  elseif(EXISTS "${ZEPHYR_CURRENT_MODULE_DIR}/zephyr/module.yml")
    # build.cmake of the module's zephyr/module.yml (`zephyr`, ours as ExecuTorch's)
    file(STRINGS "${ZEPHYR_CURRENT_MODULE_DIR}/zephyr/module.yml" _cmake_line
         REGEX "^  cmake: ")
    string(REGEX REPLACE "^  cmake: *" "" _cmake_line "${_cmake_line}")
    get_filename_component(_cmake_dir "${ZEPHYR_CURRENT_MODULE_DIR}/${_cmake_line}" ABSOLUTE)
  endif()
  add_subdirectory("${_cmake_dir}" "${CMAKE_BINARY_DIR}/modules/${_name}")
endforeach()
unset(ZEPHYR_CURRENT_MODULE_DIR)

# --- 5. the application's library --------------------------------------------------------------
zephyr_library_named(app)

# As Zephyr's top-level CMakeLists.txt does once everything is configured: a Zephyr library
# given no sources is warned about and left out of the build (an empty file keeps CMake from
# refusing it).
function(_stand_in_empty_libraries)
  get_property(libraries GLOBAL PROPERTY ZEPHYR_LIBS)
  foreach(library IN LISTS libraries)
    get_property(sources TARGET ${library} PROPERTY SOURCES)
    if(NOT sources)
      message(WARNING "No SOURCES given to Zephyr library: ${library}\nExcluding target from build.")
      file(WRITE "${CMAKE_BINARY_DIR}/empty_file.c" "")
      target_sources(${library} PRIVATE "${CMAKE_BINARY_DIR}/empty_file.c")
      set_property(TARGET ${library} PROPERTY EXCLUDE_FROM_ALL TRUE)
    endif()
  endforeach()
endfunction()
cmake_language(DEFER DIRECTORY "${CMAKE_SOURCE_DIR}" CALL _stand_in_empty_libraries)
set(Zephyr_FOUND TRUE)
