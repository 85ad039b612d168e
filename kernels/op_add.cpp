// cortex_m_nn::add.out → arm_elementwise_add_s8 (add_out), the int16 case
// (add_int16_out) arm_elementwise_add_s16, row by row for broadcast inputs (see
// cortex_m_nn/elementwise.h). Also runs sub: the lowering negates input 2's multiplier.
// Reference: python/cortex_m_nn/ops/add.py.
#include "cortex_m_nn/elementwise.h"
#include "cortex_m_nn_operators.h"

namespace cortex_m_nn {
namespace native {

namespace {
// `n` elements of T through `function`, arm_elementwise_add_s8 (T int8_t) or, the int16 case,
// arm_elementwise_add_s16 (T int16_t): both take the same parameters, p's.
template <typename T, typename Function>
arm_cmsis_nn_status add_block(
    Function function, const cortex_m_nn_add_prepared& p, const T* a, const T* b, T* o,
    int32_t n) {
  return function(
      a, b, p.input1_offset, p.input1_multiplier, p.input1_shift, p.input2_offset,
      p.input2_multiplier, p.input2_shift, p.left_shift, o, p.output_offset, p.output_multiplier,
      p.output_shift, p.activation_min, p.activation_max, n);
}

// Every output row through add_block (elementwise_rows checks the broadcast and `valid`).
template <typename T, typename Function>
void add_rows(CallContext& context, Function function, const cortex_m_nn_add_prepared& p,
              const Tensor& input1, const Tensor& input2, bool valid, Tensor& out) {
  elementwise_rows<T>(
      context, "add", input1, input2, out, valid,
      [&](const T* a, const T* b, T* o, int32_t n) { return add_block(function, p, a, b, o, n); });
}

// Every case's parameters, as the prepared entry holds them (`size` 0: it is set where an entry
// is compared); used once the case finds them valid.
cortex_m_nn_add_prepared add_parameters(
    int64_t input1_offset, int64_t input1_multiplier, int64_t input1_shift,
    int64_t input2_offset, int64_t input2_multiplier, int64_t input2_shift, int64_t left_shift,
    const OutputQuant& output) {
  const OutputQuant::Int32 q = output.int32();
  return cortex_m_nn_add_prepared{
      static_cast<int32_t>(input1_offset), static_cast<int32_t>(input1_multiplier),
      static_cast<int32_t>(input1_shift), static_cast<int32_t>(input2_offset),
      static_cast<int32_t>(input2_multiplier), static_cast<int32_t>(input2_shift),
      static_cast<int32_t>(left_shift), q.offset, q.multiplier, q.shift, q.activation_min,
      q.activation_max, 0};
}

// Both input requantizations in CMSIS-NN's ranges, a left shift of at least 0.
bool are_input_requantizations(int64_t input1_multiplier, int64_t input1_shift,
                               int64_t input2_multiplier, int64_t input2_shift,
                               int64_t left_shift) {
  return is_requantization(input1_multiplier, input1_shift) &&
      is_requantization(input2_multiplier, input2_shift) && left_shift >= 0;
}
}  // namespace

void add_out(
    CallContext& context,
    const Tensor& input1,
    const Tensor& input2,
    int64_t input1_offset,
    int64_t input1_multiplier,
    int64_t input1_shift,
    int64_t input2_offset,
    int64_t input2_multiplier,
    int64_t input2_shift,
    int64_t left_shift,
    int64_t output_offset,
    int64_t output_multiplier,
    int64_t output_shift,
    int64_t activation_min,
    int64_t activation_max,
    Tensor& out) {
  const OutputQuant output{
      output_offset, output_multiplier, output_shift, activation_min, activation_max};
  const cortex_m_nn_add_prepared p = add_parameters(
      input1_offset, input1_multiplier, input1_shift, input2_offset, input2_multiplier,
      input2_shift, left_shift, output);
  const bool requantizations = are_input_requantizations(
      input1_multiplier, input1_shift, input2_multiplier, input2_shift, left_shift);
  const bool valid = output.valid_s8() && requantizations && left_shift <= 30 &&
      is_s8_input_offset(input1_offset) && is_s8_input_offset(input2_offset);
  if (context.checks() && valid) {  // an entry only where nothing broadcasts (prepared.h)
    const Shape4 shape = shape4(out);
    const bool whole = same_shape(shape4(input1), shape) && same_shape(shape4(input2), shape);
    cortex_m_nn_add_prepared derived = p;
    derived.size = shape.d[0] * shape.d[1] * shape.d[2] * shape.d[3];
    const bool agrees = whole
        ? context.prepared_agrees("add", CORTEX_M_NN_PREPARED_ADD, &derived, sizeof(derived))
        : runs_unprepared(context, "add");
    if (!agrees) {
      return;
    }
  }
  add_rows<int8_t>(context, arm_elementwise_add_s8, p, input1, input2, valid, out);
}

// The int16 case, unprepared: offsets 0 (the s16 kernel ignores them); a left shift of at most
// 15 and input shifts of at most 0 keep an int16 in int32.
void add_int16_out(
    CallContext& context, const Tensor& input1, const Tensor& input2, int64_t input1_offset,
    int64_t input1_multiplier, int64_t input1_shift, int64_t input2_offset,
    int64_t input2_multiplier, int64_t input2_shift, int64_t left_shift, int64_t output_offset,
    int64_t output_multiplier, int64_t output_shift, int64_t activation_min,
    int64_t activation_max, Tensor& out) {
  const OutputQuant output{
      output_offset, output_multiplier, output_shift, activation_min, activation_max};
  const bool valid = output.valid_s16() &&
      are_input_requantizations(
          input1_multiplier, input1_shift, input2_multiplier, input2_shift, left_shift) &&
      input1_offset == 0 && input2_offset == 0 && input1_shift <= 0 && input2_shift <= 0 &&
      left_shift <= 15;
  if (runs_unprepared(context, "add")) {
    const cortex_m_nn_add_prepared p = add_parameters(
        input1_offset, input1_multiplier, input1_shift, input2_offset, input2_multiplier,
        input2_shift, left_shift, output);
    add_rows<int16_t>(context, arm_elementwise_add_s16, p, input1, input2, valid, out);
  }
}

void add_prepared(CallContext& context, EValue** args) {
  const auto& p = *static_cast<const cortex_m_nn_add_prepared*>(context.prepared());
  check_status(
      context,
      "add",
      add_block(
          arm_elementwise_add_s8, p, proven_tensor(args, add_args::input1).const_data_ptr<int8_t>(),
          proven_tensor(args, add_args::input2).const_data_ptr<int8_t>(),
          proven_tensor(args, add_args::out).mutable_data_ptr<int8_t>(), p.size));
}

}  // namespace native
}  // namespace cortex_m_nn
