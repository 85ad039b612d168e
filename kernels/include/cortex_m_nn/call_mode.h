// How much of a kernel call to do: check the arguments, compute, or both.
//
// ExecuTorch has no prepare step: a kernel sees its arguments only when it is called, so by
// default every call checks every argument before it computes (kChecked) — any ExecuTorch
// program, loaded by anyone, runs so. The firmware API (src/model.cpp) does what TFLite Micro's
// Prepare does instead: after loading forward it runs it once with every call in kCheckOnly
// (each kernel checks its arguments, then returns without computing), and from then on its
// calls run in kProven (each kernel computes without checking again). A program's arguments do
// not change after loading: tensor shapes are static and the values are the program's
// constants, so a proof at load covers every later run.
//
// A call knows which program it belongs to by its argument list: ExecuTorch keeps each
// instruction's list in the method allocator of the method that loaded it. The firmware API
// registers its method allocator's bytes here; a call whose list lies in no registered range
// runs in kChecked.
//
// With the range the firmware API may register the program's prepared calls (a CallPlan over
// the table of cortex_m_nn/prepared.h): the proof pass then gives the calls their entries in
// order, each kernel of a prepared operator compares its entry with its arguments, and a proven
// call finds its entry again by its argument list (the one expected next, as calls come in
// order every run).
#pragma once

#include <cstddef>
#include <cstdint>

#include <executorch/runtime/core/error.h>
#include <executorch/runtime/core/evalue.h>
#include <executorch/runtime/kernel/kernel_runtime_context.h>

#include "cortex_m_nn/prepared.h"

namespace executorch {
namespace runtime {
class Method;
}  // namespace runtime
}  // namespace executorch

namespace cortex_m_nn {

enum class CallMode : uint8_t {
  kChecked,    // check the arguments, then compute
  kCheckOnly,  // check the arguments only (a proof pass)
  kProven,     // compute: a proof pass checked these arguments
};

// A program's prepared calls (cortex_m_nn/prepared.h: `count` entries in flash, in call order)
// and what its calls keep in RAM: each call's argument list, recorded by the proof pass, and the
// call expected next. One thread runs a program at a time, so `next` needs no lock.
struct CallPlan {
  const cortex_m_nn_prepared_call* calls = nullptr;
  size_t count = 0;
  const void** arguments = nullptr;  // `count` of them
  size_t next = 0;
};

// Calls whose argument lists lie in [begin, end) run in `mode` from now on, with `plan`'s
// entries if given; kChecked forgets the range. False when every slot (kCallModeRanges) is
// taken by other ranges. Safe while other threads or cores run kernels: a call outside
// [begin, end) never takes this mode.
bool set_call_mode(const void* begin, const void* end, CallMode mode, CallPlan* plan);

// The mode of a call whose argument list is at `arguments`; *plan: its range's plan (or null).
CallMode call_mode(const void* arguments, CallPlan** plan);

// One kernel call: ExecuTorch's context, the call's mode and its prepared entry. The kernels and
// their shared checks take it where ExecuTorch's kernels take a KernelRuntimeContext; the
// generated boxed entry points (cortex_m_nn_register.cpp) make it from the argument list.
class CallContext {
 public:
  // The call whose argument list is `arguments`: its mode and, in a registered plan, its entry.
  CallContext(executorch::runtime::KernelRuntimeContext& context, const void* arguments);
  // Mark the call failed (the method's execute() then returns `error`).
  void fail(executorch::runtime::Error error) { context_.fail(error); }
  // Whether the call (or a call inside it) has failed.
  bool failed() const { return context_.failure_state() != executorch::runtime::Error::Ok; }
  // A call a kernel makes inside this one (cortex_m_nn::stage's steps): this call's mode, no
  // prepared entry (it runs unprepared, as every call outside the firmware API does).
  CallContext unprepared() const {
    CallContext inner(*this);
    inner.prepared_ = nullptr;
    inner.plan_ = nullptr;
    return inner;
  }
  // Whether to check the arguments: not once a proof pass has.
  bool checks() const { return mode_ != CallMode::kProven; }
  // Whether to compute: not in a proof pass.
  bool computes() const { return mode_ != CallMode::kCheckOnly; }
  // A proven call's prepared entry (cortex_m_nn/prepared.h), or null: then it runs unprepared.
  const void* prepared() const { return prepared_; }
  // In a proof pass with a plan: whether this call's entry is of `kind` and holds the `bytes` at
  // `derived` (what the kernel derived from its arguments); logs and fails the call otherwise.
  // True without a plan (nothing to compare).
  bool prepared_agrees(const char* op, uint32_t kind, const void* derived, size_t bytes);

 private:
  executorch::runtime::KernelRuntimeContext& context_;
  CallMode mode_;
  const void* prepared_ = nullptr;
  CallPlan* plan_ = nullptr;  // a proof pass's plan
  size_t index_ = 0;          // this call's place in it
};

// A proven call's argument `index` as a tensor: the proof checked its kind.
inline const executorch::aten::Tensor& proven_tensor(
    executorch::runtime::EValue** arguments, size_t index) {
  return arguments[index]->payload.as_tensor;
}

// A proven call's optional tensor argument `index`: its data, or null when None.
template <typename T>
const T* proven_optional_data(executorch::runtime::EValue** arguments, size_t index) {
  const executorch::runtime::EValue* value = arguments[index];
  return value->isTensor() ? value->payload.as_tensor.const_data_ptr<T>() : nullptr;
}

// How many method allocators can be registered at once (loaded programs of the firmware API).
inline constexpr int kCallModeRanges = 4;

// The proof pass of a loaded method whose allocator holds [begin, end): steps through it once
// (execute() would ask for inputs) with its calls in kCheckOnly, then marks them kProven.
// Kernels that are not cortex_m_nn's compute as usual. With a `plan` every call is compared with
// its prepared entry, and the table must have as many calls as the method. The method must be
// straight-line code, as cortex-m-compile writes it: no jump. A refused call's error is
// returned, with its instruction's index in *instruction (the instruction count when the table
// has more calls than the method), and the calls stay checked; Error::MemoryAllocationFailed
// when no range slot is free.
executorch::runtime::Error prove(
    executorch::runtime::Method& method, const void* begin, const void* end,
    size_t* instruction, CallPlan* plan = nullptr);

}  // namespace cortex_m_nn
