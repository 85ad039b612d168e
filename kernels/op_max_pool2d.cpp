// cortex_m_nn::max_pool2d.out → arm_max_pool_s8 (NHWC int8, same quantization in and out,
// fused activation clamp); int16 → arm_max_pool_s16. Checks and arguments: cortex_m_nn/pool_common.h.
// Reference: python/cortex_m_nn/ops/max_pool2d.py.
#include "cortex_m_nn/pool_common.h"
#include "cortex_m_nn_operators.h"

namespace cortex_m_nn {
namespace native {

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
  PoolArgs args;
  const PoolWindow window{kernel_size, stride, padding, ceil_mode, activation_min, activation_max};
  if (!prepare_pool(context, "max_pool2d", input, window, out, &args)) {
    return;
  }
  if (!context.computes()) {
    return;
  }
  const cmsis_nn_context no_buffer{nullptr, 0};
  const arm_cmsis_nn_status status = is_type(input, ScalarType::Short)
      ? arm_max_pool_s16(
            &no_buffer, &args.params, &args.input_dims, input.const_data_ptr<int16_t>(),
            &args.filter_dims, &args.output_dims, out.mutable_data_ptr<int16_t>())
      : arm_max_pool_s8(
            &no_buffer, &args.params, &args.input_dims, input.const_data_ptr<int8_t>(),
            &args.filter_dims, &args.output_dims, out.mutable_data_ptr<int8_t>());
  check_status(context, "max_pool2d", status);
}

}  // namespace native
}  // namespace cortex_m_nn
