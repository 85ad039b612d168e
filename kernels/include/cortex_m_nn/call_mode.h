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
#pragma once

#include <cstddef>
#include <cstdint>

#include <executorch/runtime/core/error.h>
#include <executorch/runtime/kernel/kernel_runtime_context.h>

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

// Calls whose argument lists lie in [begin, end) run in `mode` from now on; kChecked forgets
// the range. False when every slot (kCallModeRanges) is taken by other ranges. Safe while
// other threads or cores run kernels: a call outside [begin, end) never takes this mode.
bool set_call_mode(const void* begin, const void* end, CallMode mode);

// The mode of a call whose argument list is at `arguments`.
CallMode call_mode(const void* arguments);

// One kernel call: ExecuTorch's context and the call's mode. The kernels and their shared checks
// take it where ExecuTorch's kernels take a KernelRuntimeContext; the generated boxed entry
// points (cortex_m_nn_register.cpp) make it.
class CallContext {
 public:
  CallContext(executorch::runtime::KernelRuntimeContext& context, CallMode mode)
      : context_(context), mode_(mode) {}
  // Mark the call failed (the method's execute() then returns `error`).
  void fail(executorch::runtime::Error error) { context_.fail(error); }
  // Whether to check the arguments: not once a proof pass has.
  bool checks() const { return mode_ != CallMode::kProven; }
  // Whether to compute: not in a proof pass.
  bool computes() const { return mode_ != CallMode::kCheckOnly; }

 private:
  executorch::runtime::KernelRuntimeContext& context_;
  CallMode mode_;
};

// How many method allocators can be registered at once (loaded programs of the firmware API).
inline constexpr int kCallModeRanges = 4;

// The proof pass of a loaded method whose allocator holds [begin, end): steps through it once
// (execute() would ask for inputs) with its calls in kCheckOnly, then marks them kProven.
// Kernels that are not cortex_m_nn's compute as usual. The method must be straight-line code,
// as cortex-m-compile writes it: no jump. A refused call's error is returned, with its
// instruction's index in *instruction, and the calls stay checked;
// Error::MemoryAllocationFailed when no range slot is free.
executorch::runtime::Error prove(
    executorch::runtime::Method& method, const void* begin, const void* end,
    size_t* instruction);

}  // namespace cortex_m_nn
