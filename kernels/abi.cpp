// What this kernel build is: ISA, rounding and operator ABI version. A program records the
// same three (methods cortex_m_nn_isa, cortex_m_nn_rounding, cortex_m_nn_ops_version), and
// loaders compare them before running it (cortex_m_nn.testing, the firmware API).
#include "cortex_m_nn/kernel_support.h"
#include "cortex_m_nn_operators.h"

#define CORTEX_M_NN_STRINGIFY_(x) #x
#define CORTEX_M_NN_STRINGIFY(x) CORTEX_M_NN_STRINGIFY_(x)

#if defined(ARM_MATH_MVEI)
#define CORTEX_M_NN_ISA_NAME "mve"
#elif defined(ARM_MATH_DSP)
#define CORTEX_M_NN_ISA_NAME "dsp"
#else
#define CORTEX_M_NN_ISA_NAME "scalar"
#endif

#if defined(CMSIS_NN_USE_SINGLE_ROUNDING)
#define CORTEX_M_NN_ROUNDING_NAME "single"
#else
#define CORTEX_M_NN_ROUNDING_NAME "double"
#endif

extern "C" const char* cortex_m_nn_kernels_abi(void) {
  return "isa=" CORTEX_M_NN_ISA_NAME " rounding=" CORTEX_M_NN_ROUNDING_NAME
         " ops_version=" CORTEX_M_NN_STRINGIFY(CORTEX_M_NN_OPS_VERSION);
}
