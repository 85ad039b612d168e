# Toolchain file for bare-metal Cortex-M with the GNU Arm Embedded toolchain (Debian's
# gcc-arm-none-eabi 12.2 checked), installed with the CMake package (docs/cmake.md) and used by
# tests/target's runner, its samples/bare_metal and the benchmarks' peers. Pick the core with -DCORTEX_M_NN_CPU=cortex-m55 (default),
# cortex-m33, cortex-m4, cortex-m3, ...; cores with an FPU use the hard-float ABI.
set(CMAKE_SYSTEM_NAME Generic)
set(CMAKE_SYSTEM_PROCESSOR arm)
set(CMAKE_C_COMPILER arm-none-eabi-gcc)
set(CMAKE_CXX_COMPILER arm-none-eabi-g++)
set(CMAKE_ASM_COMPILER arm-none-eabi-gcc)
set(CMAKE_OBJCOPY arm-none-eabi-objcopy)
set(CMAKE_TRY_COMPILE_TARGET_TYPE STATIC_LIBRARY)
set(CMAKE_TRY_COMPILE_PLATFORM_VARIABLES CORTEX_M_NN_CPU)

if(NOT CORTEX_M_NN_CPU)
  set(CORTEX_M_NN_CPU cortex-m55)
endif()
if(CORTEX_M_NN_CPU MATCHES "^cortex-m(55|85|52|33|35p|4|7)$")
  set(_float_abi -mfloat-abi=hard)
else()
  set(_float_abi -mfloat-abi=soft)
endif()
set(CMAKE_C_FLAGS_INIT "-mcpu=${CORTEX_M_NN_CPU} -mthumb ${_float_abi} -ffunction-sections -fdata-sections")
set(CMAKE_CXX_FLAGS_INIT "${CMAKE_C_FLAGS_INIT}")
set(CMAKE_ASM_FLAGS_INIT "${CMAKE_C_FLAGS_INIT}")
set(CMAKE_EXE_LINKER_FLAGS_INIT "-Wl,--gc-sections")

set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
