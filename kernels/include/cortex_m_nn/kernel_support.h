// Shared argument checks and conversions for the cortex_m_nn kernels.
//
// Every check logs one line naming the operator and the problem, marks the kernel call as
// failed (the method's execute() then returns the error) and makes the kernel return: no
// asserts, no aborts, no allocation. Checks run unless the call is proven (context.checks(),
// cortex_m_nn/call_mode.h); a kernel computes only if context.computes().
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>

#include <executorch/runtime/kernel/kernel_includes.h>

extern "C" {
#include "arm_nn_math_types.h"
#include "arm_nn_types.h"
}

#include "cortex_m_nn/abi.h"
#include "cortex_m_nn/call_mode.h"
#include "cortex_m_nn/prepared_entries.h"

namespace cortex_m_nn {
namespace native {

using executorch::aten::IntArrayRef;
using executorch::aten::ScalarType;
using executorch::aten::Tensor;
using executorch::runtime::Error;
using executorch::runtime::KernelRuntimeContext;

// The ISA this kernel library was compiled for, as the .pte names it ("mve", "dsp", "scalar").
inline constexpr const char* kIsa = abi::kIsa;

// Unless the call is proven or `condition` holds: log "cortex_m_nn::<op>: <message>", fail the
// call and return from the (void) kernel. The message is a printf format literal followed by
// its arguments. `condition` is not evaluated in a proven call.
#define CORTEX_M_NN_CHECK(context, condition, op, ...)                      \
  do {                                                                      \
    if ((context).checks() && !(condition)) {                               \
      ET_LOG(Error, "cortex_m_nn::" op ": " __VA_ARGS__);                   \
      (context).fail(::executorch::runtime::Error::InvalidArgument);        \
      return;                                                               \
    }                                                                       \
  } while (0)

// A check that runs only while a call's arguments are checked (the proof pass at load, or a call
// outside the firmware API), never in a proven call: kept out of line and optimised for size,
// so the image carries one compact copy and a proven call never reaches it.
#define CORTEX_M_NN_CHECK_ONLY __attribute__((cold, noinline))

inline bool is_type(const Tensor& tensor, ScalarType type) {
  return tensor.scalar_type() == type;
}

// A contiguous tensor of `type` with `dim` dimensions.
inline bool has_layout(const Tensor& tensor, ScalarType type, ssize_t dim) {
  return tensor.scalar_type() == type && tensor.dim() == dim;
}

inline bool is_pair(IntArrayRef values) {
  return values.size() == 2;
}

// CMSIS-NN dims of a 4-D NHWC tensor.
inline cmsis_nn_dims nhwc_dims(const Tensor& tensor) {
  return cmsis_nn_dims{
      static_cast<int32_t>(tensor.size(0)),
      static_cast<int32_t>(tensor.size(1)),
      static_cast<int32_t>(tensor.size(2)),
      static_cast<int32_t>(tensor.size(3))};
}

// A (h, w) pair as CMSIS-NN's {w, h} tile.
inline cmsis_nn_tile tile(IntArrayRef hw) {
  return cmsis_nn_tile{static_cast<int32_t>(hw[1]), static_cast<int32_t>(hw[0])};
}

inline bool fits_int32(int64_t value) {
  return value >= INT32_MIN && value <= INT32_MAX;
}

inline bool is_int8_range(int64_t min, int64_t max) {
  return min >= -128 && max <= 127 && min <= max;
}

inline bool is_int16_range(int64_t min, int64_t max) {
  return min >= INT16_MIN && max <= INT16_MAX && min <= max;
}

// The planned scratch is int8, as the operators' schemas make it; fails the call otherwise (a
// damaged .pte: its int8 data pointer would stop the process).
inline bool check_scratch_type(CallContext& context, const char* op, const Tensor& scratch) {
  if (is_type(scratch, ScalarType::Char)) {
    return true;
  }
  ET_LOG(Error, "cortex_m_nn::%s: the scratch tensor must be int8", op);
  context.fail(Error::InvalidProgram);
  return false;
}

// The planned scratch buffer as CMSIS-NN's context. Unless the call is proven, fails the call
// when the plan gave less than CMSIS-NN asks for on this build's ISA (`required()`: a .pte
// compiled for another target) or the scratch is not int8.
template <typename Required>
inline bool scratch_context(
    CallContext& context,
    const char* op,
    const Tensor& scratch,
    Required required_bytes,
    cmsis_nn_context* out) {
  if (context.checks() && !check_scratch_type(context, op, scratch)) {
    return false;
  }
  const size_t planned = scratch.numel();  // bytes: the scratch is int8 (checked)
  if (context.checks()) {
    const int32_t required = required_bytes();
    if (required < 0 || planned < static_cast<size_t>(required)) {
      ET_LOG(
          Error,
          "cortex_m_nn::%s: the .pte plans %u scratch bytes, CMSIS-NN needs %d on this %s "
          "build: recompile the model for the target these kernels were built for",
          op,
          static_cast<unsigned>(planned),
          static_cast<int>(required),
          kIsa);
      context.fail(Error::InvalidProgram);
      return false;
    }
  }
  out->buf = planned ? scratch.mutable_data_ptr<int8_t>() : nullptr;
  out->size = static_cast<int32_t>(planned);
  return true;
}

// Unless the call is proven: whether the program carries no prepared entry for this call, as a
// case that runs unprepared (int16 activations, int4 weights) must; fails the call otherwise.
inline bool runs_unprepared(CallContext& context, const char* op) {
  return !context.checks() || context.prepared_agrees(op, CORTEX_M_NN_PREPARED_NONE, nullptr, 0);
}

// scratch_context for a case that runs unprepared (runs_unprepared), in a call that computes.
// False: return without computing.
template <typename Required>
inline bool unprepared_scratch(CallContext& context, const char* op, const Tensor& scratch,
                               Required required_bytes, cmsis_nn_context* out) {
  return runs_unprepared(context, op) &&
      scratch_context(context, op, scratch, required_bytes, out) && context.computes();
}

// A proven call's planned scratch tensor (argument `index`) as CMSIS-NN's context.
inline cmsis_nn_context proven_scratch(executorch::runtime::EValue** args, size_t index) {
  const Tensor& scratch = proven_tensor(args, index);
  return cmsis_nn_context{
      scratch.numel() ? scratch.mutable_data_ptr<int8_t>() : nullptr,
      static_cast<int32_t>(scratch.numel())};
}

// An optional tensor's data, or null when it is absent.
template <typename T>
const T* optional_data(const std::optional<Tensor>& tensor) {
  return tensor.has_value() ? tensor->const_data_ptr<T>() : nullptr;
}

// A call's `path` argument (python/cortex_m_nn/core/cmsis_nn.py): which function computes it,
// each path a kernel case of its own. Unless the call is proven: refused when the path is not
// the one the case runs (`runs`: a program from another compiler, or damaged).
inline bool check_path(CallContext& context, const char* op, int64_t path, int64_t runs) {
  if (context.checks() && path != runs) {
    ET_LOG(Error, "cortex_m_nn::%s: path %d is not this call's case (path %d): compile the "
                  "program again", op, static_cast<int>(path), static_cast<int>(runs));
    context.fail(Error::InvalidProgram);
    return false;
  }
  return true;
}

// Log and fail the call when CMSIS-NN reports an error.
inline void check_status(CallContext& context, const char* op, arm_cmsis_nn_status status) {
  if (status != ARM_CMSIS_NN_SUCCESS) {
    ET_LOG(Error, "cortex_m_nn::%s: CMSIS-NN returned status %d", op, static_cast<int>(status));
    context.fail(Error::Internal);
  }
}

}  // namespace native
}  // namespace cortex_m_nn
