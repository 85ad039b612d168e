// What the boundary kernels (quantize, dequantize) share: the check of their dtypes and
// quantization, and the copy through the permuted walk that folds the NCHW <-> NHWC change in.
// Each kernel adds only its conversion of a run (with a vector path where the ISA has one); the
// integer side is int8 or int16 (--activations int16), a template case of the same kernels.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "cortex_m_nn/kernel_checks.h"
#include "cortex_m_nn/permute.h"

namespace cortex_m_nn {
namespace native {

// The zero point an integer tensor of type `Q` may have: int8 any in [-128, 127], int16 only 0
// (int16 activations are symmetric).
template <typename Q>
bool valid_zero_point(int64_t zero_point) {
  if (sizeof(Q) == 2) {
    return zero_point == 0;
  }
  return zero_point >= -128 && zero_point <= 127;
}

// Checks input is `From`, out is `To` (`types` says which, for the log), scale > 0 and the
// zero point one the integer side takes (valid_zero_point), and that `permutation` maps input's
// shape onto out's; then converts every
// element with convert(source, destination, count, out_stride, in_stride), called once per
// run of PermutedWalk::for_each_run (source and destination at the run's first elements).
// Fails the call otherwise.
template <typename From, typename To, typename Convert>
void convert_permuted(
    CallContext& context,
    const char* op,
    const char* types,
    const Tensor& input,
    double scale,
    int64_t zero_point,
    IntArrayRef permutation,
    Tensor& out,
    Convert convert) {
  using executorch::runtime::CppTypeToScalarType;
  using Integer = typename std::conditional<std::is_integral<From>::value, From, To>::type;
  if (context.checks() && (!is_type(input, CppTypeToScalarType<From>::value) ||
      !is_type(out, CppTypeToScalarType<To>::value) || !(scale > 0.0) || !std::isfinite(scale) ||
      !valid_zero_point<Integer>(zero_point))) {
    ET_LOG(
        Error,
        "cortex_m_nn::%s: %s, scale > 0 and zero point in [-128, 127] (int8) or 0 (int16)",
        op,
        types);
    context.fail(Error::InvalidArgument);
    return;
  }
  PermutedWalk walk;
  if (!walk.init(context, op, input, permutation, out)) {
    return;
  }
  if (!context.computes()) {
    return;
  }
  const From* source = input.const_data_ptr<From>();
  To* destination = out.mutable_data_ptr<To>();
  walk.for_each_run([&](ptrdiff_t o, ptrdiff_t i, ptrdiff_t count, ptrdiff_t out_step,
                        ptrdiff_t in_step) {
    convert(source + i, destination + o, count, out_step, in_step);
  });
}

}  // namespace native
}  // namespace cortex_m_nn
