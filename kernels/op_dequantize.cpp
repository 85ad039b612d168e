// cortex_m_nn::dequantize.out: int8 → float32 at the model output, with the layout change
// folded in: (q - zero_point) * scale in float32, as PT2E's dequantize_per_tensor computes it.
// CMSIS-NN has no such kernel; this is a plain loop. Reference: python/cortex_m_nn/ops/dequantize.py.
#include <cmath>

#include "cortex_m_nn/kernel_support.h"
#include "cortex_m_nn/permute.h"
#include "cortex_m_nn_operators.h"

namespace cortex_m_nn {
namespace native {

void dequantize_out(
    KernelRuntimeContext& context,
    const Tensor& input,
    double scale,
    int64_t zero_point,
    IntArrayRef permutation,
    Tensor& out) {
  CORTEX_M_NN_CHECK(
          context,
          is_type(input, ScalarType::Char) && is_type(out, ScalarType::Float) &&
              scale > 0.0 && std::isfinite(scale) && zero_point >= -128 && zero_point <= 127,
          "dequantize",
          "input must be int8, out float32, scale > 0 and zero point in [-128, 127]");
  PermutedWalk walk;
  if (!walk.init(context, "dequantize", input, permutation, out)) {
    return;
  }
  const float factor = static_cast<float>(scale);
  const int32_t zero = static_cast<int32_t>(zero_point);
  const int8_t* source = input.const_data_ptr<int8_t>();
  float* destination = out.mutable_data_ptr<float>();
  walk.for_each([&](int64_t o, int64_t i) {
    destination[o] = static_cast<float>(static_cast<int32_t>(source[i]) - zero) * factor;
  });
}

}  // namespace native
}  // namespace cortex_m_nn
