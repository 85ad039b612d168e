// cortex_m_nn::Model::embedded(): the program built into the image (cortex_m_nn_model.c/.h,
// which `cortex-m-compile embed` generates), with the memory the build reserved for it and its
// kernel calls prepared ahead of time. Compiled only into an image that embeds a model; an
// image that only loads programs at run time (docs/program-image.md) leaves it out.
#include <stddef.h>
#include <stdint.h>

#include <new>

#include "cortex_m_nn/abi.h"
#include "cortex_m_nn/model.h"
#include "cortex_m_nn_model.h"
#include "model_state.h"

// --- the embedded program against this build's kernel ABI (cortex_m_nn/abi.h) -----------------

// The Zephyr Kconfig choice of ISA must be the CMSIS-NN path the compiler's flags select.
#if defined(CONFIG_CORTEX_M_NN_ISA_MVE) && CORTEX_M_NN_ABI_ISA != CORTEX_M_NN_ABI_ISA_MVE
#error "CONFIG_CORTEX_M_NN_ISA_MVE is set but the compiler does not emit MVE: set CONFIG_FPU=y"
#elif defined(CONFIG_CORTEX_M_NN_ISA_DSP) && CORTEX_M_NN_ABI_ISA != CORTEX_M_NN_ABI_ISA_DSP
#error "CONFIG_CORTEX_M_NN_ISA_DSP does not match the compiler's -mcpu (see cmake/gcc-m-cpu.cmake)"
#elif defined(CONFIG_CORTEX_M_NN_ISA_SCALAR) && CORTEX_M_NN_ABI_ISA != CORTEX_M_NN_ABI_ISA_SCALAR
#error "CONFIG_CORTEX_M_NN_ISA_SCALAR does not match the compiler's -mcpu (it emits DSP)"
#endif

// What cortex-m-compile embed read from the .pte (cortex_m_nn_model.h), checked at build time;
// load() checks the program itself (check_program_abi) at run time.
static_assert(cortex_m_nn::abi::same(CORTEX_M_NN_MODEL_ISA, cortex_m_nn::abi::kIsa),
              "the embedded .pte was compiled for another CMSIS-NN code path than this build's "
              "compiler emits (cortex_m_nn_model.h: CORTEX_M_NN_MODEL_ISA): recompile it with "
              "cortex-m-compile --target <core>+<isa of this build>");
static_assert(cortex_m_nn::abi::same(CORTEX_M_NN_MODEL_ROUNDING, cortex_m_nn::abi::kRounding),
              "the embedded .pte was compiled for another requantization rounding than CMSIS-NN "
              "is built with: recompile it with cortex-m-compile --rounding, or change "
              "CONFIG_CORTEX_M_NN_ROUNDING");
static_assert(CORTEX_M_NN_MODEL_OPS_VERSION == cortex_m_nn::abi::kOpsVersion,
              "the embedded .pte uses another operator version than these kernels: compile the "
              "model and build the firmware with the same cortex-m-nn release");

// --- memory reserved at build time ----------------------------------------------------------

#if defined(CORTEX_M_NN_ARENA_NODELABEL)
// The arena goes to the memory-region node CONFIG_CORTEX_M_NN_ARENA_MEMORY names: Zephyr's
// linker script gives every "zephyr,memory-region" node a NOLOAD section of that name.
#include <zephyr/devicetree.h>
#include <zephyr/linker/devicetree_regions.h>
#define CORTEX_M_NN_ARENA_PLACEMENT \
  __attribute__((section(LINKER_DT_NODE_REGION_NAME(DT_NODELABEL(CORTEX_M_NN_ARENA_NODELABEL)))))
#else
#define CORTEX_M_NN_ARENA_PLACEMENT
#endif

#ifndef CORTEX_M_NN_TEMP_ALLOCATOR_BYTES
#define CORTEX_M_NN_TEMP_ALLOCATOR_BYTES 0
#endif
#ifndef CORTEX_M_NN_LOAD_TEMP_BYTES
#error "cortex_m_nn_model.h records no load-time allocator: regenerate it (cortex-m-compile embed)"
#endif
// The temporary allocator: what loading forward needs (cortex-m-compile sized the method
// allocator for it) or what the application asked for, whichever is larger.
#define CORTEX_M_NN_TEMP_POOL_BYTES                                  \
  (CORTEX_M_NN_TEMP_ALLOCATOR_BYTES > CORTEX_M_NN_LOAD_TEMP_BYTES ? \
       CORTEX_M_NN_TEMP_ALLOCATOR_BYTES                             \
                                                                  : CORTEX_M_NN_LOAD_TEMP_BYTES)

#if !defined(CORTEX_M_NN_MODEL_INPUT_INT8) || !defined(CORTEX_M_NN_MODEL_PREPARED_CALLS)
#error "cortex_m_nn_model.h lacks I/O types or prepared calls: regenerate it (cortex-m-compile)"
#endif
// forward's kernel calls prepared ahead of time (cortex_m_nn_model.c, cortex_m_nn/prepared.h)
extern "C" const cortex_m_nn_prepared_call cortex_m_nn_model_prepared[];

namespace cortex_m_nn {
namespace {

constexpr size_t kAlignment = 16;
constexpr size_t kPlannedBuffers = CORTEX_M_NN_PLANNED_BUFFERS;
static_assert(kPlannedBuffers <= kMaxPlannedBuffers,
              "the embedded program plans more buffers than the firmware API places");
constexpr size_t kPlannedSizes[kPlannedBuffers > 0 ? kPlannedBuffers : 1] =
    CORTEX_M_NN_PLANNED_BUFFER_SIZES;
constexpr size_t kArenaBytes = CORTEX_M_NN_ARENA_BYTES > 0 ? CORTEX_M_NN_ARENA_BYTES : 1;

// Each input's and output's type and quantization, as cortex-m-compile embed read them.
constexpr uint8_t kInputInt8[] = CORTEX_M_NN_MODEL_INPUT_INT8;
constexpr float kInputScales[] = CORTEX_M_NN_MODEL_INPUT_SCALES;
constexpr int32_t kInputZeroPoints[] = CORTEX_M_NN_MODEL_INPUT_ZERO_POINTS;
constexpr uint8_t kOutputInt8[] = CORTEX_M_NN_MODEL_OUTPUT_INT8;
constexpr float kOutputScales[] = CORTEX_M_NN_MODEL_OUTPUT_SCALES;
constexpr int32_t kOutputZeroPoints[] = CORTEX_M_NN_MODEL_OUTPUT_ZERO_POINTS;
constexpr size_t kInputTypes = sizeof(kInputInt8) / sizeof(kInputInt8[0]);
constexpr size_t kOutputTypes = sizeof(kOutputInt8) / sizeof(kOutputInt8[0]);
static_assert(kInputTypes <= kMaxIo && kOutputTypes <= kMaxIo,
              "the embedded program has more inputs or outputs than the firmware API records");

alignas(kAlignment) uint8_t arena[kArenaBytes] CORTEX_M_NN_ARENA_PLACEMENT;
alignas(kAlignment) uint8_t method_pool[CORTEX_M_NN_METHOD_ALLOCATOR_BYTES];
#if CORTEX_M_NN_TEMP_POOL_BYTES > 0
alignas(kAlignment) uint8_t temp_pool[CORTEX_M_NN_TEMP_POOL_BYTES];
constexpr size_t kTempBytes = sizeof(temp_pool);
#else
uint8_t* const temp_pool = nullptr;
constexpr size_t kTempBytes = 0;
#endif
// Each prepared call's argument list (the proof finds them): see call_mode.h.
const void* prepared_arguments[CORTEX_M_NN_MODEL_PREPARED_CALLS + 1];

IoTypes embedded_io() {
  IoTypes io;
  io.inputs = kInputTypes;
  io.outputs = kOutputTypes;
  for (size_t i = 0; i < kInputTypes; ++i) {
    io.input_int8[i] = kInputInt8[i];
    io.input_scales[i] = kInputScales[i];
    io.input_zero_points[i] = kInputZeroPoints[i];
  }
  for (size_t i = 0; i < kOutputTypes; ++i) {
    io.output_int8[i] = kOutputInt8[i];
    io.output_scales[i] = kOutputScales[i];
    io.output_zero_points[i] = kOutputZeroPoints[i];
  }
  return io;
}

}  // namespace

Model& Model::embedded() {
  static const Embedded kEmbedded{
      {arena, sizeof(arena), method_pool, sizeof(method_pool), temp_pool, kTempBytes},
      cortex_m_nn_model,
      cortex_m_nn_model_size,
      kPlannedSizes,
      kPlannedBuffers,
      cortex_m_nn_model_prepared,
      CORTEX_M_NN_MODEL_PREPARED_CALLS,
      prepared_arguments,
      embedded_io()};
  // Constructed in place on the first call and never destroyed: a function-local `static
  // Model` would register its destructor (__cxa_atexit, __dso_handle), which a Zephyr image
  // links only with CONFIG_STATIC_INIT_GNU (tests/zephyr/test_zephyr_build.py).
  alignas(Model) static unsigned char storage[sizeof(Model)];
  static Model* const model = new (storage) Model(kEmbedded);
  return *model;
}

}  // namespace cortex_m_nn
