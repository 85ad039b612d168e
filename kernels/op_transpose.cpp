// cortex_m_nn::transpose.out → arm_transpose_s8 (an int8 tensor with its dims permuted; the
// lowering only emits ranks 2-4, never an identity); an int16 tensor (int16 activations) by our
// own loop, CMSIS-NN having no s16 transpose. Reference: python/cortex_m_nn/ops/transpose.py.
#include "cortex_m_nn/kernel_checks.h"
#include "cortex_m_nn_operators.h"

namespace cortex_m_nn {
namespace native {

namespace {
// out[i0, i1, i2, i3] = input[the same indices permuted by `order`], dims padded to 4 with 1.
void transpose_s16(
    const int16_t* input, int16_t* out, const int32_t in[4], const int32_t o[4],
    const uint32_t order[4]) {
  int64_t stride[4];  // input strides, in elements
  stride[3] = 1;
  for (int d = 2; d >= 0; --d) {
    stride[d] = stride[d + 1] * in[d + 1];
  }
  const int64_t s0 = stride[order[0]], s1 = stride[order[1]], s2 = stride[order[2]],
                s3 = stride[order[3]];
  for (int32_t a = 0; a < o[0]; ++a) {
    for (int32_t b = 0; b < o[1]; ++b) {
      for (int32_t c = 0; c < o[2]; ++c) {
        const int16_t* from = input + a * s0 + b * s1 + c * s2;
        for (int32_t d = 0; d < o[3]; ++d) {
          *out++ = from[d * s3];
        }
      }
    }
  }
}
}  // namespace

void transpose_out(
    CallContext& context,
    const Tensor& input,
    IntArrayRef permutation,
    Tensor& out) {
  const ssize_t rank = input.dim();
  const bool s16 = is_type(input, ScalarType::Short);
  CORTEX_M_NN_CHECK(
      context,
      same_rank(input, out, s16 ? ScalarType::Short : ScalarType::Char, 2, 4) &&
          static_cast<ssize_t>(permutation.size()) == rank,
      "transpose",
      "input and out must be int8 (or both int16) of one rank 2-4 with a permutation of that "
      "length");
  uint32_t order[4] = {0, 1, 2, 3};
  bool seen[4] = {false, false, false, false};
  bool identity = true;
  for (ssize_t i = 0; i < rank; ++i) {
    const int64_t source = permutation[i];
    CORTEX_M_NN_CHECK(
        context,
        source >= 0 && source < rank && !seen[source] && out.size(i) == input.size(source),
        "transpose",
        "permutation does not map the input shape onto out");
    seen[source] = true;
    order[i] = static_cast<uint32_t>(source);
    identity = identity && source == i;
  }
  // arm_transpose_s8 swaps a 2-D tensor whatever the permutation says, and with MVE always
  // swaps dims 2 and 3 of a 4-D permutation starting 0, 1: the identity would come out wrong.
  CORTEX_M_NN_CHECK(context, !identity, "transpose", "identity permutation (emit a copy)");
  int32_t in[4] = {1, 1, 1, 1}, o[4] = {1, 1, 1, 1};
  for (ssize_t i = 0; i < rank; ++i) {
    in[i] = static_cast<int32_t>(input.size(i));
    o[i] = static_cast<int32_t>(out.size(i));
  }
  const bool narrow = rank == 2 || (rank == 4 && order[0] == 0 && order[1] == 1);
  CORTEX_M_NN_CHECK(
      context,
      !narrow || (rank == 2 ? in[0] <= 65535 && in[1] <= 65535 : in[2] <= 65535 && in[3] <= 65535),
      "transpose",
      "a dimension above 65535 that CMSIS-NN counts in 16 bits");
  if (!context.computes()) {
    return;
  }
  if (s16) {  // the padded dims (order[i] = i past the rank) stay in place
    transpose_s16(input.const_data_ptr<int16_t>(), out.mutable_data_ptr<int16_t>(), in, o, order);
    return;
  }
  const cmsis_nn_dims input_dims{in[0], in[1], in[2], in[3]};
  const cmsis_nn_dims output_dims{o[0], o[1], o[2], o[3]};
  const cmsis_nn_transpose_params params{static_cast<int32_t>(rank), order};
  check_status(
      context, "transpose",
      arm_transpose_s8(
          input.const_data_ptr<int8_t>(), out.mutable_data_ptr<int8_t>(), &input_dims,
          &output_dims, &params));
}

}  // namespace native
}  // namespace cortex_m_nn
