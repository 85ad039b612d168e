// What the boundary kernels (quantize, dequantize) share: the check of their dtypes and
// quantization, and the copy through the permuted walk that folds the NCHW <-> NHWC change in.
// Each kernel adds only its per-element conversion. A new dtype (int16 model inputs) is a
// case of the same kernels: see docs/adding-an-operator.md.
#pragma once

#include <cmath>
#include <cstdint>

#include "cortex_m_nn/kernel_checks.h"
#include "cortex_m_nn/permute.h"

namespace cortex_m_nn {
namespace native {

// Checks input is `From`, out is `To` (`types` says which, for the log), scale > 0 and the
// zero point int8, and that `permutation` maps input's shape onto out's; then sets
// out[o] = convert(input[i]) for every element, out in order. Fails the call otherwise.
template <typename From, typename To, typename Convert>
void convert_permuted(
    KernelRuntimeContext& context,
    const char* op,
    const char* types,
    const Tensor& input,
    double scale,
    int64_t zero_point,
    IntArrayRef permutation,
    Tensor& out,
    Convert convert) {
  using executorch::runtime::CppTypeToScalarType;
  if (!is_type(input, CppTypeToScalarType<From>::value) ||
      !is_type(out, CppTypeToScalarType<To>::value) || !(scale > 0.0) || !std::isfinite(scale) ||
      zero_point < -128 || zero_point > 127) {
    ET_LOG(
        Error,
        "cortex_m_nn::%s: %s, scale > 0 and zero point in [-128, 127]",
        op,
        types);
    context.fail(Error::InvalidArgument);
    return;
  }
  PermutedWalk walk;
  if (!walk.init(context, op, input, permutation, out)) {
    return;
  }
  const From* source = input.const_data_ptr<From>();
  To* destination = out.mutable_data_ptr<To>();
  walk.for_each([&](int64_t o, int64_t i) { destination[o] = convert(source[i]); });
}

}  // namespace native
}  // namespace cortex_m_nn
