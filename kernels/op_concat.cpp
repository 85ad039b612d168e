// cortex_m_nn::concat.out: the inputs copied side by side into the one planned output with
// arm_concatenation_s8_{x,y,z,w} (x is CMSIS-NN's innermost axis), one call per input. The
// inputs share the output's quantization. Reference: python/cortex_m_nn/ops/concat.py.
#include "cortex_m_nn/kernel_support.h"
#include "cortex_m_nn_operators.h"

extern "C" {
#include "arm_nnfunctions.h"
}

namespace cortex_m_nn {
namespace native {

namespace {
constexpr int64_t kMax16 = 65535;

// The shape left-padded with 1s to [w, z, y, x].
void wzyx(const Tensor& tensor, int64_t shape[4]) {
  const ssize_t rank = tensor.dim();
  for (int i = 0; i < 4; ++i) {
    shape[i] = 1;
  }
  for (ssize_t i = 0; i < rank; ++i) {
    shape[4 - rank + i] = tensor.size(i);
  }
}

// Each input in turn into `destination` (out, of shape `out_shape` in w, z, y, x order) along
// dimension d4 of that order.
void copy_inputs(
    executorch::aten::ArrayRef<Tensor> inputs, int d4, const int64_t out_shape[4],
    int8_t* destination) {
  uint32_t offset = 0;
  for (const Tensor& input : inputs) {
    int64_t s[4];
    wzyx(input, s);
    const int8_t* source = input.const_data_ptr<int8_t>();
    const uint16_t w = s[0], z = s[1], y = s[2], x = s[3];
    switch (d4) {
      case 3:
        arm_concatenation_s8_x(source, x, y, z, w, destination, out_shape[3], offset);
        break;
      case 2:
        arm_concatenation_s8_y(source, x, y, z, w, destination, out_shape[2], offset);
        break;
      case 1:
        arm_concatenation_s8_z(source, x, y, z, w, destination, out_shape[1], offset);
        break;
      default:
        arm_concatenation_s8_w(source, x, y, z, w, destination, offset);
        break;
    }
    offset += static_cast<uint32_t>(s[d4]);
  }
}

}  // namespace

void concat_out(
    CallContext& context,
    executorch::aten::ArrayRef<Tensor> inputs,
    int64_t dim,
    Tensor& out) {
  const ssize_t rank = out.dim();
  CORTEX_M_NN_CHECK(
      context,
      is_type(out, ScalarType::Char) && rank >= 1 && rank <= 4 && inputs.size() >= 1 &&
          dim >= 0 && dim < rank,
      "concat",
      "out must be int8 of rank 1-4, dim in range, at least one input");
  const int d4 = static_cast<int>(dim + 4 - rank);
  int64_t out_shape[4];
  wzyx(out, out_shape);
  int64_t along = 0;
  for (const Tensor& input : inputs) {
    int64_t shape[4];
    wzyx(input, shape);
    bool ok = is_type(input, ScalarType::Char) && input.dim() == rank;
    for (int i = 0; ok && i < 4; ++i) {
      ok = shape[i] <= kMax16 && (i == d4 || shape[i] == out_shape[i]);
    }
    CORTEX_M_NN_CHECK(
        context,
        ok,
        "concat",
        "inputs must be int8 of out's rank, equal to out except along dim, dims <= 65535");
    along += shape[d4];
  }
  CORTEX_M_NN_CHECK(
      context,
      along == out_shape[d4] && out_shape[d4] <= kMax16,
      "concat",
      "inputs add up to %d along dim %d, out has %d", (int)along, (int)dim,
      (int)out_shape[d4]);
  if (context.computes()) {
    copy_inputs(inputs, d4, out_shape, out.mutable_data_ptr<int8_t>());
  }
}

}  // namespace native
}  // namespace cortex_m_nn
