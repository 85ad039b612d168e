// cortex_m_nn::quantize.out: float32 → int8 at the model input, with the layout change folded
// in. Rounds like PT2E's quantize_per_tensor: round-half-even(x * (1 / scale)) in float32,
// plus the zero point, clamped. CMSIS-NN has no such kernel; this is a plain loop.
// Reference: python/cortex_m_nn/ops/quantize.py.
#include <cmath>

#include "cortex_m_nn/kernel_support.h"
#include "cortex_m_nn/permute.h"
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
  CORTEX_M_NN_CHECK(
          context,
          is_type(input, ScalarType::Float) && is_type(out, ScalarType::Char) &&
              scale > 0.0 && std::isfinite(scale) && zero_point >= -128 && zero_point <= 127,
          "quantize",
          "input must be float32, out int8, scale > 0 and zero point in [-128, 127]");
  PermutedWalk walk;
  if (!walk.init(context, "quantize", input, permutation, out)) {
    return;
  }
  const float inverse = static_cast<float>(1.0 / scale);
  const float zero = static_cast<float>(zero_point);
  const float* source = input.const_data_ptr<float>();
  int8_t* destination = out.mutable_data_ptr<int8_t>();
  walk.for_each([&](int64_t o, int64_t i) {
    // nearbyintf rounds half to even in the default rounding mode, as torch.round does.
    float q = std::nearbyint(source[i] * inverse) + zero;
    q = q < -128.0f ? -128.0f : (q > 127.0f ? 127.0f : q);
    destination[o] = static_cast<int8_t>(q);
  });
}

}  // namespace native
}  // namespace cortex_m_nn
