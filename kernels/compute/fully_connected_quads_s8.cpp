// fully_connected_quads_s8 and fully_connected_quads_per_channel_s8 (cortex_m_nn/compute.h):
// an int8 fully connected layer, per-tensor or per-channel requantization.
//
// Each output is bias + the sum over the input features of (input + input_offset) * weight,
// requantized by CMSIS-NN's arithmetic (either rounding), plus output_offset, clamped: the
// integers of arm_fully_connected_s8 and arm_fully_connected_per_channel_s8 (a filter offset of
// 0).
//
// CMSIS-NN's vector-matrix product off MVE (arm_nn_vec_mat_mult_t_s8) computes two output
// features at a time: per four inputs it loads and sign-extends the input word again for every
// pair. Here four output features share it: per four inputs one input load and two SXTAB16
// (the input offset added as they widen), then per feature one weight load, two SXTB16 and two
// SMLAD: 23 instructions for 16 MACs, the loop in assembly. The four sums are requantized by
// the SMMULR form of double rounding where every sum of the call allows it, else by CMSIS-NN's
// helper. The last features (fewer than four) and the last in_features % 4 inputs are summed
// in C. No buffer.
#include "cortex_m_nn/compute.h"

#include <cstring>

#include "arm_nnfunctions.h"
#include "arm_nnsupportfunctions.h"
#include "dsp_arith.h"

namespace cortex_m_nn {
namespace compute {
namespace {

using namespace dsp;  // NOLINT: the DSP arithmetic by its instructions' names

constexpr int32_t kGroup = 4;  // inputs per group: one input word
constexpr int32_t kQuad = 4;   // output features a pass computes

#if !defined(ARM_MATH_MVEI)
// Four output features' rows on one input row: the input, the first row, a row's bytes, the
// groups of four inputs, the input offset in both halves, then the sums (their first values
// in, the sums out).
struct Quad {
  const int8_t* input;  // 0
  const int8_t* rows;   // 4
  int32_t depth;        // 8
  int32_t groups;       // 12
  uint32_t offsets;     // 16
  int32_t sums[kQuad];  // 20
};

#if defined(ARM_MATH_DSP)
// One group: the input word widened plus the offset, then the four rows' products.
#define CORTEX_M_NN_QUAD_ROW(LOAD, ACC)       \
  LOAD                                        \
  "sxtb16 r12, r11\n\t"                       \
  "sxtb16 r11, r11, ror #8\n\t"               \
  "smlad " ACC ", r8, r12, " ACC "\n\t"       \
  "smlad " ACC ", r9, r11, " ACC "\n\t"
#define CORTEX_M_NN_QUAD_GROUP                                   \
  "ldr r9, [r0], #4\n\t"                                         \
  "sxtab16 r8, r10, r9\n\t"                                      \
  "sxtab16 r9, r10, r9, ror #8\n\t"                              \
  CORTEX_M_NN_QUAD_ROW("ldr r11, [r1, r2]\n\t", "r5")            \
  CORTEX_M_NN_QUAD_ROW("ldr r11, [r1], #4\n\t", "r4")            \
  CORTEX_M_NN_QUAD_ROW("ldr r11, [lr, r2]\n\t", "r7")            \
  CORTEX_M_NN_QUAD_ROW("ldr r11, [lr], #4\n\t", "r6")

// The quad's sums over its groups (at least one); rows any alignment. Two groups a pass; an
// odd count enters at the second.
__attribute__((naked, noinline)) void quad_sums(Quad* /*quad*/) {
  __asm volatile(
      "push {r0, r4-r11, lr}\n\t"
      "ldrd r1, r2, [r0, #4]\n\t"
      "ldrd r3, r10, [r0, #12]\n\t"
      "add lr, r0, #20\n\t"
      "ldm lr, {r4-r7}\n\t"
      "ldr r0, [r0]\n\t"
      "add lr, r1, r2, lsl #1\n\t"
      "adds r3, r3, #1\n\t"
      "lsrs r3, r3, #1\n\t"
      "bcc 2f\n"
      "1:\n\t" CORTEX_M_NN_QUAD_GROUP
      "2:\n\t" CORTEX_M_NN_QUAD_GROUP
      "subs r3, r3, #1\n\t"
      "bne 1b\n\t"
      "pop {r0}\n\t"
      "adds r0, r0, #20\n\t"
      "stm r0, {r4-r7}\n\t"
      "pop {r4-r11, pc}\n\t");
}
#undef CORTEX_M_NN_QUAD_GROUP
#undef CORTEX_M_NN_QUAD_ROW
#else
inline uint32_t sxtab16(uint32_t offsets, uint32_t v) { return sadd16(sxtb16(v), offsets); }

void quad_sums(Quad* quad) {
  const int8_t* input = quad->input;
  for (int32_t g = 0; g < quad->groups; ++g, input += kGroup) {
    uint32_t word;
    std::memcpy(&word, input, sizeof(word));
    const uint32_t x02 = sxtab16(quad->offsets, word);
    const uint32_t x13 = sxtab16(quad->offsets, word >> 8);
    for (int32_t r = 0; r < kQuad; ++r) {
      uint32_t w;
      std::memcpy(&w, quad->rows + r * quad->depth + g * kGroup, sizeof(w));
      quad->sums[r] = smlad(x13, sxtb16_ror8(w), smlad(x02, sxtb16(w), quad->sums[r]));
    }
  }
}
#endif
#endif  // !ARM_MATH_MVEI

// One call's shapes and arithmetic.
struct Call {
  int32_t batches;
  int32_t depth;     // input features
  int32_t features;  // output features
  const int8_t* weights;
  const int32_t* bias;  // may be null
  int32_t multiplier;
  int32_t shift;
  const int32_t* multipliers;  // per output feature, or null (per tensor: multiplier, shift)
  const int32_t* shifts;
  int32_t input_offset;
  int32_t output_offset;
  int32_t low;
  int32_t high;
};

// The call's requantization and clamp: per output feature (per channel), else the call's.
struct Output {
  Scale scale;
  int32_t offset;
  int32_t low;
  int32_t high;

  static Output of(const Call& call, int32_t o) {
    const bool per_channel = call.multipliers != nullptr;
    return Output{scale_of(per_channel ? call.multipliers[o] : call.multiplier,
                           per_channel ? call.shifts[o] : call.shift),
                  call.output_offset, call.low, call.high};
  }

  // A sum's output byte value (`kFast`: double rounding's SMMULR form).
  template <bool kFast>
  int32_t operator()(int32_t sum) const {
    const int32_t v = rescale<kFast>(sum, scale) + offset;
    return v < low ? low : (v > high ? high : v);
  }
};

// Output feature o's sum on one input row from its first value, in C.
int32_t feature_sum(const Call& call, const int8_t* input, int32_t o, int32_t from,
                    int32_t sum) {
  const int8_t* w = call.weights + o * call.depth;
  for (int32_t k = from; k < call.depth; ++k) {
    sum += (input[k] + call.input_offset) * w[k];
  }
  return sum;
}

#if !defined(ARM_MATH_MVEI)
// One input row's output features: four at a time (the last features one by one, in C). The
// per-tensor requantization is copied to locals (every byte store may alias what the call
// points to); per channel (kPerChannel), each feature's is read as it is stored.
template <bool kFast, bool kPerChannel>
void row(const Call& call, const int8_t* input, int8_t* out) {
  const Output tensor = Output::of(call, 0);
  const auto output = [&](int32_t o, int32_t sum) {
    return (kPerChannel ? Output::of(call, o) : tensor).template operator()<kFast>(sum);
  };
  const int32_t depth = call.depth, features = call.features;
  const uint32_t offsets = (static_cast<uint32_t>(call.input_offset) & 0xFFFFu) * 0x10001u;
  Quad quad{input, call.weights, depth, depth / kGroup, offsets, {}};
  const bool tail = depth % kGroup != 0;
  const int32_t* bias = call.bias;
  int32_t o = 0;
  for (; o + kQuad <= features && quad.groups != 0; o += kQuad, quad.rows += kQuad * depth) {
    for (int32_t r = 0; r < kQuad; ++r) {
      quad.sums[r] = bias != nullptr ? bias[o + r] : 0;
    }
    quad_sums(&quad);
    if (tail) {
      for (int32_t r = 0; r < kQuad; ++r) {
        quad.sums[r] = feature_sum(call, input, o + r, quad.groups * kGroup, quad.sums[r]);
      }
    }
    const int32_t v0 = output(o, quad.sums[0]);
    const int32_t v1 = output(o + 1, quad.sums[1]);
    const int32_t v2 = output(o + 2, quad.sums[2]);
    const int32_t v3 = output(o + 3, quad.sums[3]);
    out[o] = static_cast<int8_t>(v0);
    out[o + 1] = static_cast<int8_t>(v1);
    out[o + 2] = static_cast<int8_t>(v2);
    out[o + 3] = static_cast<int8_t>(v3);
  }
  for (; o < features; ++o) {
    const int32_t sum = feature_sum(call, input, o, 0, bias != nullptr ? bias[o] : 0);
    out[o] = static_cast<int8_t>(output(o, sum));
  }
}
#else
// Output features o to o + 3's first values for a call with an input offset: their bias plus
// the offset times their weights' sums, by CMSIS-NN's arm_vector_sum_s8 (which a program runs
// at compile time instead, passing the kernel sums with an offset of 0).
__attribute__((noinline)) int32x4_t offset_starts(const Call& call, int32_t o) {
  int32_t starts[kQuad];
  arm_vector_sum_s8(starts, call.depth, kQuad, call.weights + o * call.depth, call.input_offset,
                    0, call.bias != nullptr ? call.bias + o : nullptr);
  return vldrwq_s32(starts);
}

// One input row's output features on MVE, four at a time: per 16 inputs one input load, then
// per feature one weight load and one VMLADAVA (10 instructions for 64 MACs, the last inputs
// tail predicated), then the four sums requantized as one vector (CMSIS-NN's MVE arithmetic),
// offset, clamped and stored together. The last features (fewer than four) in C.
template <bool kPerChannel>
void row_mve(const Call& call, const int8_t* input, int8_t* out) {
  const int32_t depth = call.depth, features = call.features;
  const int32_t* const multipliers = call.multipliers;
  const int32_t* const shifts = call.shifts;
  const int32_t multiplier = call.multiplier, shift = call.shift;
  const int32x4_t low = vdupq_n_s32(call.low), high = vdupq_n_s32(call.high);
  const int32_t offset = call.output_offset, input_offset = call.input_offset;
  const int32_t* const bias = call.bias;
  int32_t o = 0;
  for (; o + kQuad <= features; o += kQuad) {
    const int8_t* in = input;
    const int8_t* w0 = call.weights + o * depth;
    const int8_t* w1 = w0 + depth;
    const int8_t* w2 = w1 + depth;
    const int8_t* w3 = w2 + depth;
    int32_t a0 = 0, a1 = 0, a2 = 0, a3 = 0;
    __asm volatile(
        " .p2align 2\n"
        "   wlstp.8 lr, %[count], 1f\n"
        "2:\n"
        "   vldrb.8 q0, [%[in]], #16\n"
        "   vldrb.8 q1, [%[w0]], #16\n"
        "   vmladava.s8 %[a0], q0, q1\n"
        "   vldrb.8 q1, [%[w1]], #16\n"
        "   vmladava.s8 %[a1], q0, q1\n"
        "   vldrb.8 q1, [%[w2]], #16\n"
        "   vmladava.s8 %[a2], q0, q1\n"
        "   vldrb.8 q1, [%[w3]], #16\n"
        "   vmladava.s8 %[a3], q0, q1\n"
        "   letp lr, 2b\n"
        "1:\n"
        : [in] "+r"(in), [w0] "+r"(w0), [w1] "+r"(w1), [w2] "+r"(w2), [w3] "+r"(w3),
          [a0] "+Te"(a0), [a1] "+Te"(a1), [a2] "+Te"(a2), [a3] "+Te"(a3)
        : [count] "r"(depth)
        : "q0", "q1", "memory", "r14");
    const int32x4_t sums = {a0, a1, a2, a3};
    const int32x4_t starts = input_offset != 0 ? offset_starts(call, o)
                             : bias != nullptr  ? vldrwq_s32(bias + o)
                                                : vdupq_n_s32(0);
    int32x4_t v = vaddq_s32(sums, starts);
    if constexpr (kPerChannel) {
      v = arm_requantize_mve_32x4(v, vldrwq_s32(multipliers + o), vldrwq_s32(shifts + o));
    } else {
      v = arm_requantize_mve(v, multiplier, shift);
    }
    v = vminq_s32(vmaxq_s32(vaddq_n_s32(v, offset), low), high);
    vstrbq_s32(out + o, v);
  }
  for (; o < features; ++o) {
    const int32_t sum = feature_sum(call, input, o, 0, call.bias != nullptr ? call.bias[o] : 0);
    const Output each = Output::of(call, kPerChannel ? o : 0);
    out[o] = static_cast<int8_t>(each.template operator()<false>(sum));
  }
}
#endif

// Every input row of the call.
arm_cmsis_nn_status run(const Call& call, const cmsis_nn_fc_params* fc_params,
                        const cmsis_nn_dims* filter_dims, const cmsis_nn_dims* output_dims,
                        const int8_t* input, int8_t* output) {
  if (fc_params->filter_offset != 0 || filter_dims->n < 1 || output_dims->c < 1) {
    return ARM_CMSIS_NN_ARG_ERROR;
  }
  const bool per_channel = call.multipliers != nullptr;
#if defined(ARM_MATH_MVEI)
  const auto each_row = per_channel ? row_mve<true> : row_mve<false>;
#else
  const bool fast = sums_fit(call.bias, call.shifts, call.shift, call.features, call.depth);
  const auto each_row = per_channel ? (fast ? row<true, true> : row<false, true>)
                                    : (fast ? row<true, false> : row<false, false>);
#endif
  for (int32_t n = 0; n < call.batches; ++n) {
    each_row(call, input + n * call.depth, output + n * call.features);
  }
  return ARM_CMSIS_NN_SUCCESS;
}

}  // namespace

arm_cmsis_nn_status fully_connected_quads_s8(
    const cmsis_nn_context* /*ctx*/,
    const cmsis_nn_fc_params* fc_params,
    const cmsis_nn_per_tensor_quant_params* quant,
    const cmsis_nn_dims* input_dims,
    const int8_t* input,
    const cmsis_nn_dims* filter_dims,
    const int8_t* weights,
    const cmsis_nn_dims* /*bias_dims*/,
    const int32_t* bias,
    const cmsis_nn_dims* output_dims,
    int8_t* output) {
  const Call call{input_dims->n, filter_dims->n, output_dims->c, weights, bias,
                  quant->multiplier, quant->shift, nullptr, nullptr, fc_params->input_offset,
                  fc_params->output_offset, fc_params->activation.min,
                  fc_params->activation.max};
  return run(call, fc_params, filter_dims, output_dims, input, output);
}

arm_cmsis_nn_status fully_connected_quads_per_channel_s8(
    const cmsis_nn_context* /*ctx*/,
    const cmsis_nn_fc_params* fc_params,
    const cmsis_nn_per_channel_quant_params* quant,
    const cmsis_nn_dims* input_dims,
    const int8_t* input,
    const cmsis_nn_dims* filter_dims,
    const int8_t* weights,
    const cmsis_nn_dims* /*bias_dims*/,
    const int32_t* bias,
    const cmsis_nn_dims* output_dims,
    int8_t* output) {
  const Call call{input_dims->n, filter_dims->n, output_dims->c, weights, bias, 0, 0,
                  quant->multiplier, quant->shift, fc_params->input_offset,
                  fc_params->output_offset, fc_params->activation.min,
                  fc_params->activation.max};
  return run(call, fc_params, filter_dims, output_dims, input, output);
}

}  // namespace compute
}  // namespace cortex_m_nn
