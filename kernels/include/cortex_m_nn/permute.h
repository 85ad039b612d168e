// Walking a contiguous tensor in a permuted order, for the boundary quantize/dequantize that
// fold the NCHW <-> NHWC change into their copy.
#pragma once

#include <cstddef>
#include <cstdint>

#include "cortex_m_nn/kernel_support.h"

namespace cortex_m_nn {
namespace native {

constexpr size_t kMaxPermutedDims = 8;

// Source offsets of a permuted walk: output dim j walks input dim permutation[j].
class PermutedWalk {
 public:
  // False (and the call failed) when `permutation` is not a permutation of input's dims or
  // `out` does not have the permuted shape. An empty permutation keeps the order.
  bool init(
      KernelRuntimeContext& context,
      const char* op,
      const Tensor& input,
      IntArrayRef permutation,
      const Tensor& out) {
    dims_ = static_cast<size_t>(input.dim());
    bool ok = dims_ <= kMaxPermutedDims && out.dim() == input.dim() &&
        (permutation.empty() || permutation.size() == dims_);
    bool seen[kMaxPermutedDims] = {};
    int64_t stride = 1;
    int64_t input_strides[kMaxPermutedDims] = {};
    for (size_t d = dims_; ok && d-- > 0;) {
      input_strides[d] = stride;
      stride *= input.size(d);
    }
    for (size_t j = 0; ok && j < dims_; ++j) {
      const int64_t source = permutation.empty() ? static_cast<int64_t>(j) : permutation[j];
      ok = source >= 0 && source < static_cast<int64_t>(dims_) && !seen[source] &&
          out.size(j) == input.size(source);
      if (ok) {
        seen[source] = true;
        sizes_[j] = out.size(j);
        strides_[j] = input_strides[source];
      }
    }
    if (!ok) {
      ET_LOG(Error, "cortex_m_nn::%s: permutation does not map the input shape onto out", op);
      context.fail(Error::InvalidArgument);
    }
    return ok;
  }

  // Calls f(output_index, input_index) for every element, output in order.
  template <typename F>
  void for_each(F f) const {
    int64_t index[kMaxPermutedDims] = {};
    int64_t total = 1;
    for (size_t d = 0; d < dims_; ++d) {
      total *= sizes_[d];
    }
    int64_t source = 0;
    for (int64_t i = 0; i < total; ++i) {
      f(i, source);
      for (size_t d = dims_; d-- > 0;) {
        source += strides_[d];
        if (++index[d] < sizes_[d]) {
          break;
        }
        source -= strides_[d] * sizes_[d];
        index[d] = 0;
      }
    }
  }

 private:
  size_t dims_ = 0;
  int64_t sizes_[kMaxPermutedDims] = {};
  int64_t strides_[kMaxPermutedDims] = {};
};

}  // namespace native
}  // namespace cortex_m_nn
