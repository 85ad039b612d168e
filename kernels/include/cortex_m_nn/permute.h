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
      CallContext& context,
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

  // Calls f(out_offset, in_offset, count, out_stride, in_stride), all ptrdiff_t, for runs
  // covering every element once: out[out_offset + k * out_stride] takes
  // in[in_offset + k * in_stride] for k in [0, count). Size-1 dims are dropped and dims
  // contiguous in both tensors merged first, so an order-keeping walk is one run; a run
  // follows the input's contiguous dim where there is one (the boundary kernels' inner loops
  // read contiguously and vectorise).
  template <typename F>
  void for_each_run(F f) const {
    // native width: every offset lies within a tensor in memory
    ptrdiff_t size[kMaxPermutedDims];
    ptrdiff_t in_stride[kMaxPermutedDims];
    ptrdiff_t out_stride[kMaxPermutedDims];
    size_t dims = 0;
    ptrdiff_t out_step = 1;
    for (size_t d = dims_; d-- > 0;) {  // innermost first; out is contiguous in its order
      if (sizes_[d] == 0) {
        return;  // no elements
      }
      if (sizes_[d] != 1) {
        const bool merges =
            dims > 0 && in_stride[dims - 1] * size[dims - 1] == static_cast<ptrdiff_t>(strides_[d]);
        if (merges) {  // d continues the dim after it in both tensors
          size[dims - 1] *= static_cast<ptrdiff_t>(sizes_[d]);
        } else {
          size[dims] = static_cast<ptrdiff_t>(sizes_[d]);
          in_stride[dims] = static_cast<ptrdiff_t>(strides_[d]);
          out_stride[dims] = out_step;
          ++dims;
        }
      }
      out_step *= static_cast<ptrdiff_t>(sizes_[d]);
    }
    if (dims == 0) {
      f(0, 0, 1, 1, 1);
      return;
    }
    size_t run = 0;  // innermost output dim, unless another is contiguous in the input
    for (size_t d = 0; d < dims; ++d) {
      if (in_stride[d] == 1) {
        run = d;
      }
    }
    ptrdiff_t index[kMaxPermutedDims] = {};
    ptrdiff_t in_offset = 0;
    ptrdiff_t out_offset = 0;
    while (true) {
      f(out_offset, in_offset, size[run], out_stride[run], in_stride[run]);
      size_t d = 0;
      for (; d < dims; ++d) {  // the odometer over the other dims
        if (d == run) {
          continue;
        }
        in_offset += in_stride[d];
        out_offset += out_stride[d];
        if (++index[d] < size[d]) {
          break;
        }
        in_offset -= in_stride[d] * size[d];
        out_offset -= out_stride[d] * size[d];
        index[d] = 0;
      }
      if (d == dims) {
        return;
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
