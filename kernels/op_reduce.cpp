// cortex_m_nn::reduce.out: int8 sum (requantized; a mean is a sum with 1/count in the
// multiplier), max or min over any dims of a tensor of rank 1-4, reduced dims kept as size 1.
// CMSIS-NN has no general reduction; this is our own kernel, int32 accumulation and CMSIS-NN's
// arm_nn_requantize for the sum. Reference: python/cortex_m_nn/ops/reduce.py.
#include "cortex_m_nn/kernel_checks.h"
#include "cortex_m_nn_operators.h"

// The header declares its own C linkage; wrapping it in extern "C" breaks arm_mve.h's C++
// overloads on MVE builds.
#include "arm_nnsupportfunctions.h"

namespace cortex_m_nn {
namespace native {

namespace {

// The schema's `kind`.
enum Kind : int64_t { kSum = 0, kMax = 1, kMin = 2 };
constexpr int64_t kMaxCount = int64_t{1} << 23;

// The input's dims split into the kept ones (an output element) and the reduced ones.
struct Walk {
  int rank = 0;
  int64_t size[4] = {1, 1, 1, 1};
  int64_t stride[4] = {0, 0, 0, 0};
  bool reduced[4] = {false, false, false, false};
  int64_t outputs = 1;
  int64_t count = 1;

  // Input offset of the `index`-th element (row-major) over the kept (or reduced) dims.
  int64_t offset(int64_t index, bool of_reduced) const {
    int64_t result = 0;
    for (int d = rank - 1; d >= 0; --d) {
      if (reduced[d] == of_reduced) {
        result += (index % size[d]) * stride[d];
        index /= size[d];
      }
    }
    return result;
  }
};

bool prepare(const Tensor& input, IntArrayRef dims, const Tensor& out, Walk* walk) {
  walk->rank = static_cast<int>(input.dim());
  int64_t previous = -1;
  for (const int64_t d : dims) {
    if (d <= previous || d >= walk->rank) {
      return false;
    }
    walk->reduced[d] = true;
    previous = d;
  }
  int64_t stride = 1;
  for (int d = walk->rank - 1; d >= 0; --d) {
    walk->size[d] = input.size(d);
    walk->stride[d] = stride;
    stride *= walk->size[d];
    if (out.size(d) != (walk->reduced[d] ? 1 : walk->size[d])) {
      return false;
    }
    (walk->reduced[d] ? walk->count : walk->outputs) *= walk->size[d];
  }
  return !dims.empty();
}

int8_t extreme(const int8_t* data, const Walk& walk, bool largest) {
  int8_t best = data[walk.offset(0, true)];
  for (int64_t r = 1; r < walk.count; ++r) {
    const int8_t value = data[walk.offset(r, true)];
    best = largest ? (value > best ? value : best) : (value < best ? value : best);
  }
  return best;
}

}  // namespace

void reduce_out(
    CallContext& context,
    const Tensor& input,
    IntArrayRef dims,
    int64_t kind,
    int64_t input_offset,
    int64_t output_offset,
    int64_t output_multiplier,
    int64_t output_shift,
    Tensor& out) {
  Walk walk;  // prepared in every call: the walk is what the loop below follows
  const bool walks =
      same_rank(input, out, ScalarType::Char, 1, 4) && prepare(input, dims, out, &walk);
  CORTEX_M_NN_CHECK(
      context,
      walks,
      "reduce",
      "input and out must be int8 of one rank 1-4, dims sorted distinct dims of the input and "
      "out the input's shape with those dims 1");
  const bool sum = kind == kSum;
  const bool quiet = input_offset == 0 && output_offset == 0 && output_multiplier == 0 &&
      output_shift == 0;
  CORTEX_M_NN_CHECK(
      context,
      sum ? walk.count <= kMaxCount && is_s8_input_offset(input_offset) &&
              is_s8_output_offset(output_offset) && output_multiplier >= 0 &&
              is_requantization(output_multiplier, output_shift)
          : (kind == kMax || kind == kMin) && quiet,
      "reduce",
      "kind must be 0 (sum: at most 2^23 elements, int8 offsets, a requantization) or 1/2 "
      "(max/min: no requantization, integers 0)");
  if (!context.computes()) {
    return;
  }
  const int8_t* source = input.const_data_ptr<int8_t>();
  int8_t* destination = out.mutable_data_ptr<int8_t>();
  for (int64_t o = 0; o < walk.outputs; ++o) {
    const int8_t* base = source + walk.offset(o, false);
    if (!sum) {
      destination[o] = extreme(base, walk, kind == kMax);
      continue;
    }
    int32_t acc = 0;
    for (int64_t r = 0; r < walk.count; ++r) {
      acc += static_cast<int32_t>(base[walk.offset(r, true)]) + static_cast<int32_t>(input_offset);
    }
    int32_t value = arm_nn_requantize(
        acc, static_cast<int32_t>(output_multiplier), static_cast<int32_t>(output_shift));
    value += static_cast<int32_t>(output_offset);
    destination[o] = static_cast<int8_t>(value < -128 ? -128 : (value > 127 ? 127 : value));
  }
}

}  // namespace native
}  // namespace cortex_m_nn
