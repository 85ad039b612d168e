// cortex_m_nn::pad.out → arm_pad_s8 (an int8 tensor extended by a constant, already quantized
// with the tensor's scale and zero point). Reference: python/cortex_m_nn/ops/pad.py.
#include "cortex_m_nn/kernel_checks.h"
#include "cortex_m_nn_operators.h"

namespace cortex_m_nn {
namespace native {

void pad_out(
    CallContext& context,
    const Tensor& input,
    IntArrayRef pre_pad,
    IntArrayRef post_pad,
    int64_t pad_value,
    Tensor& out) {
  const ssize_t rank = input.dim();
  CORTEX_M_NN_CHECK(
      context,
      same_rank(input, out, ScalarType::Char, 1, 4) &&
          static_cast<ssize_t>(pre_pad.size()) == rank &&
          static_cast<ssize_t>(post_pad.size()) == rank && pad_value >= -128 && pad_value <= 127,
      "pad",
      "input and out must be int8 of one rank 1-4, one pad per dim, pad value int8");
  // right-aligned in {n, h, w, c}: leading sizes 1, leading pads 0
  int32_t size[4] = {1, 1, 1, 1}, pre[4] = {0, 0, 0, 0}, post[4] = {0, 0, 0, 0};
  for (ssize_t i = 0; i < rank; ++i) {
    const ssize_t d = 4 - rank + i;
    CORTEX_M_NN_CHECK(
        context,
        pre_pad[i] >= 0 && post_pad[i] >= 0 &&
            out.size(i) == pre_pad[i] + input.size(i) + post_pad[i],
        "pad",
        "dim %d: out %d != %d + %d + %d", (int)i, (int)out.size(i), (int)pre_pad[i],
        (int)input.size(i), (int)post_pad[i]);
    size[d] = static_cast<int32_t>(input.size(i));
    pre[d] = static_cast<int32_t>(pre_pad[i]);
    post[d] = static_cast<int32_t>(post_pad[i]);
  }
  if (!context.computes()) {
    return;
  }
  const cmsis_nn_dims input_size{size[0], size[1], size[2], size[3]};
  const cmsis_nn_dims pre_dims{pre[0], pre[1], pre[2], pre[3]};
  const cmsis_nn_dims post_dims{post[0], post[1], post[2], post[3]};
  check_status(
      context,
      "pad",
      arm_pad_s8(
          input.const_data_ptr<int8_t>(),
          out.mutable_data_ptr<int8_t>(),
          static_cast<int8_t>(pad_value),
          &input_size,
          &pre_dims,
          &post_dims));
}

}  // namespace native
}  // namespace cortex_m_nn
