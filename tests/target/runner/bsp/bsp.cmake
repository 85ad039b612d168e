# The bare-metal board support every QEMU image links the same way: our runner
# (tests/target/runner) and the benchmark's peers (benchmarks/peer_executorch,
# benchmarks/peer_tflm), so that their instruction counts and image sizes compare like for like.
#
#   include(<this file>)          # RUNNER_MACHINE selects <machine>.ld
#   runner_bsp_image(<target>)    # startup, bench markers, newlib-nano + semihosting, the
#                                 # machine's linker script, a map file, .elf suffix
#   runner_executorch_pal(<target>)  # ExecuTorch's log and abort hooks (semihosting)
include_guard(GLOBAL)

set(RUNNER_MACHINE "mps3-an547" CACHE STRING "QEMU machine (selects the linker script)")
set(RUNNER_BSP_DIR "${CMAKE_CURRENT_LIST_DIR}")
if(NOT EXISTS "${RUNNER_BSP_DIR}/${RUNNER_MACHINE}.ld")
  message(FATAL_ERROR "no linker script for machine ${RUNNER_MACHINE} in ${RUNNER_BSP_DIR}")
endif()
add_library(runner_bsp OBJECT "${RUNNER_BSP_DIR}/startup.c" "${RUNNER_BSP_DIR}/bench_markers.S")
target_include_directories(runner_bsp PUBLIC "${RUNNER_BSP_DIR}")

function(runner_bsp_image target)
  target_sources(${target} PRIVATE $<TARGET_OBJECTS:runner_bsp>)
  target_include_directories(${target} PRIVATE "${RUNNER_BSP_DIR}")
  set_target_properties(${target} PROPERTIES SUFFIX ".elf")
  target_link_options(${target} PRIVATE
    # newlib-nano: a printf without floating point (no image prints one), small stdio
    --specs=nano.specs --specs=rdimon.specs -nostartfiles
    "-L${RUNNER_BSP_DIR}" "-T${RUNNER_BSP_DIR}/${RUNNER_MACHINE}.ld"
    "-Wl,-Map=${CMAKE_CURRENT_BINARY_DIR}/${target}.map")
  set_property(TARGET ${target} APPEND PROPERTY LINK_DEPENDS
               "${RUNNER_BSP_DIR}/${RUNNER_MACHINE}.ld" "${RUNNER_BSP_DIR}/common.ld")
endfunction()

function(runner_executorch_pal target)
  target_sources(${target} PRIVATE "${RUNNER_BSP_DIR}/executorch_pal.cpp")
endfunction()
