// cortex_m_nn::pad.out → arm_pad_s8 (pad_out: an int8 tensor extended by a constant, already
// quantized with the tensor's scale and zero point); the int16 case (pad_int16_out) by our own
// loop, CMSIS-NN having no s16 pad. Reference: python/cortex_m_nn/ops/pad.py.
#include <type_traits>

#include "cortex_m_nn/kernel_checks.h"
#include "cortex_m_nn_operators.h"

namespace cortex_m_nn {
namespace native {

namespace {
// The padded tensor of `size` (right-aligned in 4 dims) with `pre`/`post` pads: each output
// row along the last dim is pads, the input's row (or all pads outside it), pads.
void pad_s16(
    const int16_t* input, int16_t* out, int16_t value, const int32_t size[4],
    const int32_t pre[4], const int32_t post[4]) {
  int32_t o[4];
  for (int d = 0; d < 4; ++d) {
    o[d] = pre[d] + size[d] + post[d];
  }
  for (int32_t a = 0; a < o[0]; ++a) {
    for (int32_t b = 0; b < o[1]; ++b) {
      for (int32_t c = 0; c < o[2]; ++c) {
        const int32_t ia = a - pre[0], ib = b - pre[1], ic = c - pre[2];
        const bool inside = ia >= 0 && ia < size[0] && ib >= 0 && ib < size[1] && ic >= 0 &&
            ic < size[2];
        const int16_t* row =
            inside ? input + ((static_cast<int64_t>(ia) * size[1] + ib) * size[2] + ic) * size[3]
                   : nullptr;
        for (int32_t d = 0; d < o[3]; ++d) {
          const int32_t id = d - pre[3];
          *out++ = (row != nullptr && id >= 0 && id < size[3]) ? row[id] : value;
        }
      }
    }
  }
}

// Either case: T int8_t (arm_pad_s8) or int16_t (pad_s16).
template <typename T>
void pad(CallContext& context, const Tensor& input, IntArrayRef pre_pad, IntArrayRef post_pad,
         int64_t pad_value, Tensor& out) {
  const ssize_t rank = input.dim();
  constexpr bool s16 = std::is_same_v<T, int16_t>;
  const int64_t low = s16 ? INT16_MIN : -128;
  const int64_t high = s16 ? INT16_MAX : 127;
  CORTEX_M_NN_CHECK(
      context,
      same_rank(input, out, s16 ? ScalarType::Short : ScalarType::Char, 1, 4) &&
          static_cast<ssize_t>(pre_pad.size()) == rank &&
          static_cast<ssize_t>(post_pad.size()) == rank && pad_value >= low && pad_value <= high,
      "pad",
      "input and out must be int8 (or both int16) of one rank 1-4, one pad per dim, pad value "
      "of their dtype");
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
  if constexpr (s16) {
    pad_s16(input.const_data_ptr<int16_t>(), out.mutable_data_ptr<int16_t>(),
            static_cast<int16_t>(pad_value), size, pre, post);
  } else {
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
}
}  // namespace

void pad_out(
    CallContext& context,
    const Tensor& input,
    IntArrayRef pre_pad,
    IntArrayRef post_pad,
    int64_t pad_value,
    Tensor& out) {
  pad<int8_t>(context, input, pre_pad, post_pad, pad_value, out);
}

void pad_int16_out(CallContext& context, const Tensor& input, IntArrayRef pre_pad,
                   IntArrayRef post_pad, int64_t pad_value, Tensor& out) {
  pad<int16_t>(context, input, pre_pad, post_pad, pad_value, out);
}

}  // namespace native
}  // namespace cortex_m_nn
