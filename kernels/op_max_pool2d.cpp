// cortex_m_nn::max_pool2d.out → arm_max_pool_s8 (max_pool2d_out: NHWC int8, same quantization
// in and out, fused activation clamp); the int16 case (max_pool2d_int16_out) →
// arm_max_pool_s16. Checks and arguments: cortex_m_nn/pool_common.h.
// Reference: python/cortex_m_nn/ops/max_pool2d.py.
#include "cortex_m_nn/pool_common.h"
#include "cortex_m_nn_operators.h"

namespace cortex_m_nn {
namespace native {

namespace {
// Either case: `function` is arm_max_pool_s8 (T int8_t) or arm_max_pool_s16 (T int16_t), which
// take the same arguments.
template <typename T, typename Function>
void max_pool(
    Function function, CallContext& context, const Tensor& input, const PoolWindow& window,
    Tensor& out) {
  PoolArgs args;
  if (!prepare_pool(context, "max_pool2d", input, window, out, &args) || !context.computes()) {
    return;
  }
  const cmsis_nn_context no_buffer{nullptr, 0};
  check_status(
      context, "max_pool2d",
      function(
          &no_buffer, &args.params, &args.input_dims, input.const_data_ptr<T>(),
          &args.filter_dims, &args.output_dims, out.mutable_data_ptr<T>()));
}
}  // namespace

void max_pool2d_out(
    CallContext& context,
    const Tensor& input,
    IntArrayRef kernel_size,
    IntArrayRef stride,
    IntArrayRef padding,
    bool ceil_mode,
    int64_t activation_min,
    int64_t activation_max,
    Tensor& out) {
  const PoolWindow window{kernel_size, stride, padding, ceil_mode, activation_min, activation_max};
  max_pool<int8_t>(arm_max_pool_s8, context, input, window, out);
}

void max_pool2d_int16_out(
    CallContext& context, const Tensor& input, IntArrayRef kernel_size, IntArrayRef stride,
    IntArrayRef padding, bool ceil_mode, int64_t activation_min, int64_t activation_max,
    Tensor& out) {
  const PoolWindow window{kernel_size, stride, padding, ceil_mode, activation_min, activation_max};
  max_pool<int16_t>(arm_max_pool_s16, context, input, window, out);
}

}  // namespace native
}  // namespace cortex_m_nn
