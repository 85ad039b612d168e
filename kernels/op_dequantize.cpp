// cortex_m_nn::dequantize.out: int8 → float32 at the model output, with the layout change
// folded in: (q - zero_point) * scale in float32, as PT2E's dequantize_per_tensor computes it.
// CMSIS-NN has no such kernel; this is a plain loop (see cortex_m_nn/quantize_common.h).
// Reference: python/cortex_m_nn/ops/dequantize.py.
#include "cortex_m_nn/quantize_common.h"
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
  const float factor = static_cast<float>(scale);
  const int32_t zero = static_cast<int32_t>(zero_point);
  convert_permuted<int8_t, float>(
      context, "dequantize", "input must be int8, out float32", input, scale, zero_point,
      permutation, out, [&](int8_t q) {
        return static_cast<float>(static_cast<int32_t>(q) - zero) * factor;
      });
}

}  // namespace native
}  // namespace cortex_m_nn
