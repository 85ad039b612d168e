// cortex_m_nn::gru.out: one GRU layer over a [B, T, I] or [T, B, I] int8 sequence, every step's
// hidden state out. CMSIS-NN has no GRU; this composes the functions its LSTM is made of, in
// the same Q-formats: arm_nn_vec_mat_mul_result_acc_s8_s16 for the gate products (Q3.12),
// arm_elementwise_mul_acc_s16 for the reset gate's product, arm_nn_activation_s16 for sigmoid
// and tanh (Q0.15), arm_nn_requantize for the new state h = (1 - z) n + z h. Gates are stored
// in PyTorch's order (reset, update, new); gate_parameters rows are (input multiplier, input
// shift, hidden multiplier, hidden shift). One batch item runs at a time: step t reads its
// hidden state from step t - 1's output (the first step from the initial state or the kept
// state, copied into the scratch, or the output offset: zero); only a kept state (a buffer
// of the program, nn.Streaming) is written: the last step's hidden state, for the next call. The
// scratch holds four int16 gate buffers of H and the initial state (H bytes). Shape and
// weight checks: cortex_m_nn/recurrent_common.h.
// Reference: python/cortex_m_nn/ops/gru.py.
#include <cstring>

#include "cortex_m_nn/recurrent_common.h"
#include "cortex_m_nn_operators.h"

namespace cortex_m_nn {
namespace native {
namespace {

constexpr const char* kOp = "gru";
constexpr int kGates = 3;
enum Gate { kReset = 0, kUpdate = 1, kNew = 2 };
// rq(v, kHalfMultiplier, kHalfShift): v times 2^-15 (a Q0.15 gate times a value).
constexpr int32_t kHalfMultiplier = 1 << 30;
constexpr int32_t kHalfShift = -14;
constexpr int32_t kOne = 1 << 15;  // 1.0 in Q0.15

// The constant tensors of one call.
struct GruTensors {
  const Tensor& input_weights;
  const Tensor& hidden_weights;
  const Tensor& input_biases;
  const Tensor& hidden_biases;
  const Tensor& gate_parameters;
};

bool valid_gate_parameters(const Tensor& parameters) {
  if (!has_layout(parameters, ScalarType::Int, 2) || parameters.size(0) != kGates ||
      parameters.size(1) != 4) {
    return false;
  }
  const int32_t* p = parameters.const_data_ptr<int32_t>();
  for (int k = 0; k < kGates; ++k) {
    if (!is_requantization(p[4 * k], p[4 * k + 1]) ||
        !is_requantization(p[4 * k + 2], p[4 * k + 3])) {
      return false;
    }
  }
  return true;
}

bool valid_tensors(const GruTensors& t, const RecurrentShape& s) {
  return valid_gate_weights(t.input_weights, kGates, s, s.features) &&
      valid_gate_weights(t.hidden_weights, kGates, s, s.units) &&
      valid_gate_biases(t.input_biases, kGates, s, ScalarType::Int) &&
      valid_gate_biases(t.hidden_biases, kGates, s, ScalarType::Int) &&
      valid_gate_parameters(t.gate_parameters);
}

// Where one batch item's rows are: the step stride and the first row, in elements.
struct Rows {
  int64_t stride;
  int64_t first;
};

Rows rows_of(const RecurrentShape& s, bool time_major, int32_t b, int32_t width) {
  if (time_major) {
    return Rows{static_cast<int64_t>(s.batch) * width, static_cast<int64_t>(b) * width};
  }
  return Rows{width, static_cast<int64_t>(b) * s.steps * width};
}

// The four int16 gate buffers of one step.
struct GateBuffers {
  int16_t* reset;
  int16_t* update;
  int16_t* fresh;  // the new gate: X_n + r H_n, then tanh of it
  int16_t* hidden_new;  // H_n
};

// sat16(bias + W x) of gate k onto `out` (zeroed first when `zero`), CMSIS-NN's gate product.
void product(
    const int8_t* vector, const Tensor& weights, const Tensor& biases, const int32_t* p,
    int k, int32_t columns, int32_t units, int16_t* out, bool zero) {
  if (zero) {
    std::memset(out, 0, static_cast<size_t>(units) * sizeof(int16_t));
  }
  const int8_t* w = weights.const_data_ptr<int8_t>() + static_cast<int64_t>(k) * units * columns;
  const int32_t* bias = biases.const_data_ptr<int32_t>() + static_cast<int64_t>(k) * units;
  arm_nn_vec_mat_mul_result_acc_s8_s16(vector, w, bias, out, p[0], p[1], columns, units, 1, 0);
}

// One step of one batch item: the gates from x and h, the new state into `out`.
void step(
    const GruTensors& t, const RecurrentShape& s, const int8_t* x, const int8_t* h, int32_t offset,
    int32_t state_multiplier, int32_t state_shift, const GateBuffers& g, int8_t* out) {
  const int32_t* p = t.gate_parameters.const_data_ptr<int32_t>();
  const int32_t n = s.units;
  int16_t* const gate[kGates] = {g.reset, g.update, g.fresh};
  for (int k = 0; k < kGates; ++k) {
    product(x, t.input_weights, t.input_biases, p + 4 * k, k, s.features, n, gate[k], true);
  }
  for (int k = kReset; k <= kUpdate; ++k) {
    product(h, t.hidden_weights, t.hidden_biases, p + 4 * k + 2, k, n, n, gate[k], false);
    arm_nn_activation_s16(gate[k], gate[k], n, 0, ARM_SIGMOID);
  }
  product(h, t.hidden_weights, t.hidden_biases, p + 4 * kNew + 2, kNew, n, n, g.hidden_new, true);
  arm_elementwise_mul_acc_s16(
      g.reset, g.hidden_new, 0, 0, g.fresh, 0, kHalfMultiplier, kHalfShift, INT16_MIN, INT16_MAX,
      n);
  arm_nn_activation_s16(g.fresh, g.fresh, n, 0, ARM_TANH);
  for (int32_t j = 0; j < n; ++j) {
    const int32_t z = g.update[j];
    const int32_t fresh =
        arm_nn_requantize((kOne - z) * g.fresh[j], state_multiplier, state_shift);
    const int32_t kept = arm_nn_requantize(z * (h[j] - offset), kHalfMultiplier, kHalfShift);
    const int32_t value = offset + fresh + kept;
    out[j] = static_cast<int8_t>(
        value < INT8_MIN ? INT8_MIN : (value > INT8_MAX ? INT8_MAX : value));
  }
}

// The integer arguments after the tensors, as the schema orders them.
struct GruScalars {
  int64_t time_major;
  int64_t state_multiplier;
  int64_t state_shift;
  int64_t output_offset;
};

// Every batch item's steps in turn, each step's hidden state from the previous one's output.
void run(
    const GruTensors& t, const RecurrentShape& s, const Tensor& input,
    const std::optional<Tensor>& initial_state, const std::optional<Tensor>& kept,
    const GruScalars& a, Tensor& out, Tensor& scratch) {
  auto* gates = reinterpret_cast<int16_t*>(scratch.mutable_data_ptr<int8_t>());
  const int32_t n = s.units;
  const GateBuffers g{gates, gates + n, gates + 2 * n, gates + 3 * n};
  auto* initial = reinterpret_cast<int8_t*>(gates + 4 * n);
  const int8_t* x = input.const_data_ptr<int8_t>();
  int8_t* y = out.mutable_data_ptr<int8_t>();
  const bool time_major = a.time_major != 0;
  const auto offset = static_cast<int32_t>(a.output_offset);
  const std::optional<Tensor>& hidden = kept.has_value() ? kept : initial_state;
  for (int32_t b = 0; b < s.batch; ++b) {
    if (hidden.has_value()) {
      std::memcpy(initial, hidden->const_data_ptr<int8_t>() + static_cast<int64_t>(b) * n, n);
    } else {
      std::memset(initial, offset, static_cast<size_t>(n));
    }
    const Rows in = rows_of(s, time_major, b, s.features);
    const Rows rows = rows_of(s, time_major, b, n);
    const int8_t* h = initial;
    for (int32_t index = 0; index < s.steps; ++index) {
      int8_t* row = y + rows.first + index * rows.stride;
      step(t, s, x + in.first + index * in.stride, h, offset,
           static_cast<int32_t>(a.state_multiplier), static_cast<int32_t>(a.state_shift), g, row);
      h = row;
    }
    if (kept.has_value()) {  // the last step's hidden state, for the next call
      std::memcpy(kept->mutable_data_ptr<int8_t>() + static_cast<int64_t>(b) * n, h, n);
    }
  }
}

}  // namespace

void gru_out(
    CallContext& context,
    const Tensor& input,
    const std::optional<Tensor>& hidden,
    const std::optional<Tensor>& state,
    const Tensor& input_weights,
    const Tensor& hidden_weights,
    const Tensor& input_biases,
    const Tensor& hidden_biases,
    const Tensor& gate_parameters,
    int64_t time_major,
    int64_t state_multiplier,
    int64_t state_shift,
    int64_t output_offset,
    int64_t scratch_bytes,
    Tensor& out,
    Tensor& scratch) {
  const GruTensors t{input_weights, hidden_weights, input_biases, hidden_biases, gate_parameters};
  CORTEX_M_NN_CHECK(
      context,
      has_layout(input, ScalarType::Char, 3) && has_layout(hidden_weights, ScalarType::Char, 3) &&
          hidden_weights.size(0) == kGates,
      "gru", "input must be a 3-D int8 sequence, hidden_weights int8 [3, H, H]");
  const RecurrentShape s = recurrent_shape(input, hidden_weights, time_major != 0);
  CORTEX_M_NN_CHECK(
      context,
      valid_tensors(t, s) && has_layout(out, ScalarType::Char, 3) &&
          out.size(0) == input.size(0) && out.size(1) == input.size(1) &&
          out.size(2) == s.units &&
          valid_state(hidden, ScalarType::Char, s) && valid_state(state, ScalarType::Char, s) &&
          !(hidden.has_value() && state.has_value()),
      "gru",
      "weights int8 [3, H, I] and [3, H, H], biases int32 [3, H], gate parameters int32 "
      "[3, 4] of valid requantizations, out int8 [.., .., H], an initial or a kept state "
      "int8 [B, H] (not both)");
  CORTEX_M_NN_CHECK(
      context,
      is_requantization(state_multiplier, state_shift) && is_s8_output_offset(output_offset) &&
          scratch_bytes == static_cast<int64_t>(s.units) * 9 &&
          check_scratch_type(context, kOp, scratch) &&
          scratch.nbytes() >= static_cast<size_t>(scratch_bytes),
      "gru", "state requantization, output offset or scratch (H x 9 bytes) out of range");
  if (!context.computes()) {  // no prepared form: the boxed entry checked the plan has none
    return;
  }
  run(t, s, input, hidden, state,
      GruScalars{time_major, state_multiplier, state_shift, output_offset}, out, scratch);
}

}  // namespace native
}  // namespace cortex_m_nn
