// Row-wise broadcasting for the binary element-wise kernels whose CMSIS-NN functions take one
// block size (arm_elementwise_add_s8, arm_elementwise_mul_s8). The lowering hands them inputs
// of the output's rank (<= 4) whose extents equal the output's or are 1; see
// python/cortex_m_nn/ops/broadcast.py.
#pragma once

#include <cstdint>

#include "cortex_m_nn/kernel_support.h"

namespace cortex_m_nn {
namespace native {

struct Shape4 {
  int32_t d[4];
};

// Left-padded with 1s to four dimensions.
inline Shape4 shape4(const Tensor& tensor) {
  Shape4 s{{1, 1, 1, 1}};
  const ssize_t rank = tensor.dim();
  for (ssize_t i = 0; i < rank; ++i) {
    s.d[4 - rank + i] = static_cast<int32_t>(tensor.size(i));
  }
  return s;
}

inline cmsis_nn_dims dims4(const Shape4& s) {
  return cmsis_nn_dims{s.d[0], s.d[1], s.d[2], s.d[3]};
}

// Inputs and out of `type` (int8, or int16 for the s16 kernels), ranks equal and <= 4, every
// input extent equal to out's or 1, out's extents the broadcast of the inputs'. Fails the call
// otherwise.
CORTEX_M_NN_CHECK_ONLY inline bool check_broadcast(
    CallContext& context,
    const char* op,
    const Tensor& a,
    const Tensor& b,
    const Tensor& out,
    ScalarType type = ScalarType::Char) {
  bool ok = is_type(a, type) && is_type(b, type) && is_type(out, type) && out.dim() >= 1 &&
      out.dim() <= 4 && a.dim() == out.dim() && b.dim() == out.dim();
  for (ssize_t i = 0; ok && i < out.dim(); ++i) {
    const int64_t x = a.size(i), y = b.size(i), o = out.size(i);
    ok = (x == o || x == 1) && (y == o || y == 1) && o == (x > y ? x : y);
  }
  if (!ok) {
    ET_LOG(
        Error,
        "cortex_m_nn::%s: inputs and out must be int8 (or all int16) of one rank (<= 4) whose "
        "extents are the output's or 1",
        op);
    context.fail(Error::InvalidArgument);
  }
  return ok;
}

inline bool same_shape(const Shape4& x, const Shape4& y) {
  return x.d[0] == y.d[0] && x.d[1] == y.d[1] && x.d[2] == y.d[2] && x.d[3] == y.d[3];
}

// Calls block(x, y, out, n) once over the whole output when neither input broadcasts, else over
// every output row (the innermost dimension), replicating an input broadcast along that
// dimension through a small buffer; elements of type T (int8_t, or int16_t for the s16
// kernels). block returns a CMSIS-NN status; the walk stops at the first failure and returns it.
template <typename T = int8_t, typename Block>
arm_cmsis_nn_status for_each_row(const Tensor& a, const Tensor& b, Tensor& out, Block block) {
  const Shape4 sa = shape4(a), sb = shape4(b), so = shape4(out);
  if (same_shape(sa, so) && same_shape(sb, so)) {
    const int32_t n = so.d[0] * so.d[1] * so.d[2] * so.d[3];
    return block(a.const_data_ptr<T>(), b.const_data_ptr<T>(), out.mutable_data_ptr<T>(), n);
  }
  int64_t stride_a[4], stride_b[4];
  int64_t step_a = 1, step_b = 1;
  for (int d = 3; d >= 0; --d) {
    stride_a[d] = sa.d[d] == 1 ? 0 : step_a;
    stride_b[d] = sb.d[d] == 1 ? 0 : step_b;
    step_a *= sa.d[d];
    step_b *= sb.d[d];
  }
  const T* pa = a.const_data_ptr<T>();
  const T* pb = b.const_data_ptr<T>();
  T* po = out.mutable_data_ptr<T>();
  const int32_t row = so.d[3];
  constexpr int32_t kChunk = 64;
  T repeated[kChunk];
  for (int32_t i0 = 0; i0 < so.d[0]; ++i0) {
    for (int32_t i1 = 0; i1 < so.d[1]; ++i1) {
      for (int32_t i2 = 0; i2 < so.d[2]; ++i2) {
        const T* ra = pa + i0 * stride_a[0] + i1 * stride_a[1] + i2 * stride_a[2];
        const T* rb = pb + i0 * stride_b[0] + i1 * stride_b[1] + i2 * stride_b[2];
        arm_cmsis_nn_status status = ARM_CMSIS_NN_SUCCESS;
        if (sa.d[3] == row && sb.d[3] == row) {
          status = block(ra, rb, po, row);
        } else {
          // one input is a single value for the whole row
          const bool a_repeats = sa.d[3] != row;
          for (int32_t k = 0; k < kChunk; ++k) {
            repeated[k] = a_repeats ? ra[0] : rb[0];
          }
          for (int32_t start = 0; start < row && status == ARM_CMSIS_NN_SUCCESS; start += kChunk) {
            const int32_t n = row - start < kChunk ? row - start : kChunk;
            status = a_repeats ? block(repeated, rb + start, po + start, n)
                               : block(ra + start, repeated, po + start, n);
          }
        }
        if (status != ARM_CMSIS_NN_SUCCESS) {
          return status;
        }
        po += row;
      }
    }
  }
  return ARM_CMSIS_NN_SUCCESS;
}

}  // namespace native
}  // namespace cortex_m_nn
