// cortex_m_nn::strided_copy.out: int8 elements gathered from the flat input at
// offset + sum(i_k * strides[k]) (strides may be 0 or negative), our own kernel: the inner
// dim is one memmove (stride 1: exact where a stage moves a halo down its own buffer), one
// memset (stride 0) or an element loop.
// Reference: python/cortex_m_nn/ops/strided_copy.py.
#include <cstring>

#include "cortex_m_nn/kernel_checks.h"
#include "cortex_m_nn_operators.h"

namespace cortex_m_nn {
namespace native {
namespace {

constexpr ssize_t kMaxDims = 8;

// Copy `count` elements read `stride` apart from `from` to the contiguous `to`.
void copy_run(const int8_t* from, int64_t stride, int64_t count, int8_t* to) {
  if (stride == 1) {
    std::memmove(to, from, static_cast<size_t>(count));
  } else if (stride == 0) {
    std::memset(to, *from, static_cast<size_t>(count));
  } else {
    for (int64_t i = 0; i < count; ++i) {
      to[i] = from[i * stride];
    }
  }
}

// Whether every position offset + sum(i_k * strides[k]) lies in [0, numel).
bool inside(IntArrayRef sizes, IntArrayRef strides, int64_t offset, int64_t numel) {
  int64_t low = offset, high = offset;
  for (size_t k = 0; k < sizes.size(); ++k) {
    const int64_t reach = (sizes[k] - 1) * strides[k];
    low += reach < 0 ? reach : 0;
    high += reach > 0 ? reach : 0;
  }
  return low >= 0 && high < numel;
}

}  // namespace

void strided_copy_out(
    CallContext& context,
    const Tensor& input,
    IntArrayRef sizes,
    IntArrayRef strides,
    int64_t offset,
    Tensor& out) {
  const ssize_t rank = static_cast<ssize_t>(sizes.size());
  CORTEX_M_NN_CHECK(
      context,
      is_type(input, ScalarType::Char) && is_type(out, ScalarType::Char) && rank >= 1 &&
          rank <= kMaxDims && static_cast<ssize_t>(strides.size()) == rank && out.dim() == rank,
      "strided_copy",
      "input and out must be int8, out of rank 1-8 with one size and one stride per dim");
  for (ssize_t k = 0; k < rank; ++k) {
    CORTEX_M_NN_CHECK(
        context, sizes[k] >= 1 && out.size(k) == sizes[k], "strided_copy",
        "dim %d: out has %d elements, sizes says %d", (int)k, (int)out.size(k), (int)sizes[k]);
  }
  CORTEX_M_NN_CHECK(
      context, inside(sizes, strides, offset, input.numel()), "strided_copy",
      "positions outside the input's %d elements", (int)input.numel());
  if (!context.computes()) {
    return;
  }
  const int8_t* source = input.const_data_ptr<int8_t>();
  int8_t* target = out.mutable_data_ptr<int8_t>();
  const int64_t inner = sizes[rank - 1];
  const int64_t runs = out.numel() / inner;
  int64_t index[kMaxDims] = {0};
  int64_t position = offset;  // of the current run's first element
  for (int64_t run = 0; run < runs; ++run) {
    copy_run(source + position, strides[rank - 1], inner, target + run * inner);
    for (ssize_t k = rank - 2; k >= 0; --k) {  // next run: count like an odometer
      position += strides[k];
      if (++index[k] < sizes[k]) {
        break;
      }
      position -= sizes[k] * strides[k];
      index[k] = 0;
    }
  }
}

}  // namespace native
}  // namespace cortex_m_nn
