// cortex_m_nn::quantize.out: float32 → int8 at the model input, with the layout change folded
// in. Rounds like PT2E's quantize_per_tensor: round-half-even(x * (1 / scale)) in float32,
// plus the zero point, clamped. CMSIS-NN has no such kernel; this is a plain loop (see
// cortex_m_nn/quantize_common.h). Reference: python/cortex_m_nn/ops/quantize.py.
#include <cmath>

#include "cortex_m_nn/quantize_common.h"
#include "cortex_m_nn_operators.h"

namespace cortex_m_nn {
namespace native {

void quantize_out(
    KernelRuntimeContext& context,
    const Tensor& input,
    double scale,
    int64_t zero_point,
    IntArrayRef permutation,
    Tensor& out) {
  const float inverse = static_cast<float>(1.0 / scale);
  const float zero = static_cast<float>(zero_point);
  convert_permuted<float, int8_t>(
      context, "quantize", "input must be float32, out int8", input, scale, zero_point,
      permutation, out, [&](float x) {
        // nearbyintf rounds half to even in the default rounding mode, as torch.round does.
        float q = std::nearbyint(x * inverse) + zero;
        q = q < -128.0f ? -128.0f : (q > 127.0f ? 127.0f : q);
        return static_cast<int8_t>(q);
      });
}

}  // namespace native
}  // namespace cortex_m_nn
