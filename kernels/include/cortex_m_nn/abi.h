// The kernel ABI, named once: the ISA, rounding and operator version this build of the
// cortex_m_nn kernels runs. A program (.pte) records what it was compiled for in its constant
// method cortex_m_nn_metadata (lines isa=, rounding=, ops_version=, among others) and runs only
// on kernels whose ABI is the same; check_program_abi() compares them.
//
//   ISA          the CMSIS-NN code path. CMSIS-NN's arm_nn_math_types.h turns the compiler's
//                __ARM_FEATURE_MVE / __ARM_FEATURE_DSP (or a user's ARM_MATH_HELIUM) into
//                ARM_MATH_MVEI / ARM_MATH_DSP, and its sources branch on those two: so they,
//                not the __ARM_FEATURE_* macros, name the path that runs ("mve", "dsp",
//                "scalar"; MVE implies DSP, MVE wins).
//   rounding     CMSIS_NN_USE_SINGLE_ROUNDING: "single", else "double".
//   ops_version  CORTEX_M_NN_OPS_VERSION from operators.yaml (generated cortex_m_nn_operators.h).
//
// Everything else derives from these names: cortex_m_nn_kernels_abi() (the text the Python host
// check compares), the kernels' messages, src/model.cpp's compile-time checks against the
// embedded model and the Zephyr Kconfig choice, and the runtime check of a loaded program.
#ifndef CORTEX_M_NN_ABI_H
#define CORTEX_M_NN_ABI_H

#include "arm_nn_math_types.h"
#include "cortex_m_nn_operators.h"

#define CORTEX_M_NN_ABI_ISA_SCALAR 0
#define CORTEX_M_NN_ABI_ISA_DSP 1
#define CORTEX_M_NN_ABI_ISA_MVE 2

#if defined(ARM_MATH_MVEI)
#define CORTEX_M_NN_ABI_ISA CORTEX_M_NN_ABI_ISA_MVE
#define CORTEX_M_NN_ABI_ISA_NAME "mve"
#elif defined(ARM_MATH_DSP)
#define CORTEX_M_NN_ABI_ISA CORTEX_M_NN_ABI_ISA_DSP
#define CORTEX_M_NN_ABI_ISA_NAME "dsp"
#else
#define CORTEX_M_NN_ABI_ISA CORTEX_M_NN_ABI_ISA_SCALAR
#define CORTEX_M_NN_ABI_ISA_NAME "scalar"
#endif

#if defined(CMSIS_NN_USE_SINGLE_ROUNDING)
#define CORTEX_M_NN_ABI_ROUNDING_NAME "single"
#else
#define CORTEX_M_NN_ABI_ROUNDING_NAME "double"
#endif

#define CORTEX_M_NN_ABI_OPS_VERSION CORTEX_M_NN_OPS_VERSION

#define CORTEX_M_NN_ABI_STRINGIFY_(x) #x
#define CORTEX_M_NN_ABI_STRINGIFY(x) CORTEX_M_NN_ABI_STRINGIFY_(x)

// "isa=mve rounding=double ops_version=1": the format of cortex_m_nn_kernels_abi().
#define CORTEX_M_NN_ABI_TEXT                                                           \
  "isa=" CORTEX_M_NN_ABI_ISA_NAME " rounding=" CORTEX_M_NN_ABI_ROUNDING_NAME          \
  " ops_version=" CORTEX_M_NN_ABI_STRINGIFY(CORTEX_M_NN_ABI_OPS_VERSION)

#ifdef __cplusplus
extern "C" {
#endif
// CORTEX_M_NN_ABI_TEXT, exported by the kernels library (the host check reads it by name).
const char* cortex_m_nn_kernels_abi(void);
#ifdef __cplusplus
}
#endif

#ifdef __cplusplus
#include <stdint.h>

#include <executorch/runtime/core/memory_allocator.h>
#include <executorch/runtime/executor/program.h>

namespace cortex_m_nn {
namespace abi {

inline constexpr const char* kIsa = CORTEX_M_NN_ABI_ISA_NAME;
inline constexpr const char* kRounding = CORTEX_M_NN_ABI_ROUNDING_NAME;
inline constexpr int kOpsVersion = CORTEX_M_NN_ABI_OPS_VERSION;
inline constexpr const char* kText = CORTEX_M_NN_ABI_TEXT;

// String equality usable in static_assert.
constexpr bool same(const char* a, const char* b) {
  return *a == *b && (*a == '\0' || same(a + 1, b + 1));
}

}  // namespace abi

enum class AbiStatus : uint8_t {
  kMatch = 0,
  kNoTarget,  // the program records no cortex_m_nn target: not compiled by cortex-m-compile
  kMismatch,  // compiled for another ISA, rounding or operator version
};

struct AbiCheck {
  AbiStatus status;
  // What the program was compiled for, in CORTEX_M_NN_ABI_TEXT's format ("" if it records none).
  char program[80];
  // One line naming the problem and its fix ("" when the program matches).
  char message[288];

  bool ok() const { return status == AbiStatus::kMatch; }
};

// Read the program's cortex_m_nn_isa / _rounding / _ops_version methods and compare them with
// this build's ABI. `scratch` holds each metadata method while it is read (a few hundred bytes)
// and is reset afterwards: pass the method allocator before forward is loaded into it.
AbiCheck check_program_abi(executorch::runtime::Program& program,
                           executorch::runtime::MemoryAllocator& scratch);

}  // namespace cortex_m_nn
#endif  // __cplusplus

#endif  // CORTEX_M_NN_ABI_H
