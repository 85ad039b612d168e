// cortex_m_nn::avg_pool2d.out → arm_avgpool_s8 (avg_pool2d_out: NHWC int8, same quantization
// in and out); the int16 case (avg_pool2d_int16_out) → arm_avgpool_s16.
// Checks and arguments: cortex_m_nn/pool_common.h.
// Reference: python/cortex_m_nn/ops/avg_pool2d.py.
#include "cortex_m_nn/pool_common.h"
#include "cortex_m_nn_operators.h"

namespace cortex_m_nn {
namespace native {

namespace {
// The int16 case: arm_avgpool_s16, unprepared.
void avg_pool2d_s16(
    CallContext& context, const PoolArgs& args, const Tensor& input, Tensor& out,
    Tensor& scratch) {
  cmsis_nn_context buffer;
  const auto required = [&] {
    return arm_avgpool_s16_get_buffer_size(args.output_dims.w, args.input_dims.c);
  };
  if (!unprepared_scratch(context, "avg_pool2d", scratch, required, &buffer)) {
    return;
  }
  check_status(
      context, "avg_pool2d",
      arm_avgpool_s16(
          &buffer, &args.params, &args.input_dims, input.const_data_ptr<int16_t>(),
          &args.filter_dims, &args.output_dims, out.mutable_data_ptr<int16_t>()));
}
}  // namespace

void avg_pool2d_out(
    CallContext& context,
    const Tensor& input,
    IntArrayRef kernel_size,
    IntArrayRef stride,
    IntArrayRef padding,
    bool ceil_mode,
    int64_t activation_min,
    int64_t activation_max,
    int64_t scratch_bytes,
    Tensor& out,
    Tensor& scratch) {
  (void)scratch_bytes;
  constexpr const char* kOp = "avg_pool2d";
  PoolArgs args;
  const PoolWindow window{
      kernel_size, stride, padding, ceil_mode, activation_min, activation_max};
  if (!prepare_pool(context, kOp, input, window, out, &args)) {
    return;
  }
  if (context.checks()) {
    const cortex_m_nn_avg_pool2d_prepared derived{
        args.params, args.input_dims, args.filter_dims, args.output_dims};
    if (!context.prepared_agrees(kOp, CORTEX_M_NN_PREPARED_AVG_POOL2D, &derived, sizeof(derived))) {
      return;
    }
  }
  cmsis_nn_context buffer;
  const auto required = [&] {
    return arm_avgpool_s8_get_buffer_size(args.output_dims.w, args.input_dims.c);
  };
  if (!scratch_context(context, kOp, scratch, required, &buffer) || !context.computes()) {
    return;
  }
  check_status(
      context,
      kOp,
      arm_avgpool_s8(
          &buffer,
          &args.params,
          &args.input_dims,
          input.const_data_ptr<int8_t>(),
          &args.filter_dims,
          &args.output_dims,
          out.mutable_data_ptr<int8_t>()));
}

void avg_pool2d_int16_out(
    CallContext& context, const Tensor& input, IntArrayRef kernel_size, IntArrayRef stride,
    IntArrayRef padding, bool ceil_mode, int64_t activation_min, int64_t activation_max,
    int64_t scratch_bytes, Tensor& out, Tensor& scratch) {
  (void)scratch_bytes;
  PoolArgs args;
  const PoolWindow window{kernel_size, stride, padding, ceil_mode, activation_min, activation_max};
  if (prepare_pool(context, "avg_pool2d", input, window, out, &args)) {
    avg_pool2d_s16(context, args, input, out, scratch);
  }
}

void avg_pool2d_prepared(CallContext& context, EValue** args) {
  const auto& p = *static_cast<const cortex_m_nn_avg_pool2d_prepared*>(context.prepared());
  using a = avg_pool2d_args;
  const cmsis_nn_context buffer = proven_scratch(args, a::scratch);
  check_status(
      context,
      "avg_pool2d",
      arm_avgpool_s8(
          &buffer, &p.params, &p.input, proven_tensor(args, a::input).const_data_ptr<int8_t>(),
          &p.filter, &p.output, proven_tensor(args, a::out).mutable_data_ptr<int8_t>()));
}

}  // namespace native
}  // namespace cortex_m_nn
