// The ranges of argument storage whose calls a proof pass covers, and the proof pass
// (cortex_m_nn/call_mode.h). The ranges are written only while a program loads; every kernel
// call reads them.
#include "cortex_m_nn/call_mode.h"

#include <atomic>
#include <cstdint>
#include <cstring>

#include <executorch/runtime/executor/method.h>
#include <executorch/runtime/platform/log.h>

namespace cortex_m_nn {
namespace {

using std::memory_order_acquire;
using std::memory_order_relaxed;
using std::memory_order_release;

// One registered range. Another thread (or core) may read a slot while a program loads, so
// each field is one atomic word and a slot counts only once it is whole: set_call_mode clears
// end first, writes the mode and begin, then publishes end (release). A reader takes a slot's
// begin and mode only if it read the same end before and after them (call_mode), so a stale
// or half-written slot never gives another program's calls a mode.
struct Range {
  std::atomic<uintptr_t> begin{0};
  std::atomic<uintptr_t> end{0};  // 0: empty slot
  std::atomic<CallMode> mode{CallMode::kChecked};
  std::atomic<CallPlan*> plan{nullptr};
};

Range ranges[kCallModeRanges];

// Fills an empty slot (end 0), end last.
void publish(Range& range, uintptr_t from, uintptr_t to, CallMode mode, CallPlan* plan) {
  range.mode.store(mode, memory_order_relaxed);
  range.plan.store(plan, memory_order_relaxed);
  range.begin.store(from, memory_order_relaxed);
  range.end.store(to, memory_order_release);
}

// The plan's call whose argument list is `arguments`: the one expected next (calls come in
// order), else any recorded one; `count` when none is.
size_t find_call(const CallPlan& plan, const void* arguments) {
  if (plan.next < plan.count && plan.arguments[plan.next] == arguments) {
    return plan.next;
  }
  size_t index = 0;
  while (index < plan.count && plan.arguments[index] != arguments) {
    ++index;
  }
  return index;
}

}  // namespace

bool set_call_mode(const void* begin, const void* end, CallMode mode, CallPlan* plan) {
  const uintptr_t from = reinterpret_cast<uintptr_t>(begin);
  const uintptr_t to = reinterpret_cast<uintptr_t>(end);
  Range* free_slot = nullptr;
  for (Range& range : ranges) {
    const uintptr_t range_end = range.end.load(memory_order_acquire);
    if (range_end == to && range.begin.load(memory_order_relaxed) == from) {
      if (mode == CallMode::kChecked) {
        range.end.store(0, memory_order_release);  // forget it: unregistered calls check
      } else {
        range.plan.store(plan, memory_order_relaxed);
        range.mode.store(mode, memory_order_release);
      }
      return true;
    }
    if (free_slot == nullptr && range_end == 0) {
      free_slot = &range;
    }
  }
  if (mode == CallMode::kChecked) {
    return true;  // unregistered ranges are checked already
  }
  if (free_slot == nullptr || from >= to) {
    return false;
  }
  publish(*free_slot, from, to, mode, plan);
  return true;
}

CallMode call_mode(const void* arguments, CallPlan** plan) {
  const uintptr_t at = reinterpret_cast<uintptr_t>(arguments);
  for (const Range& range : ranges) {
    const uintptr_t end = range.end.load(memory_order_acquire);
    if (at < end && at >= range.begin.load(memory_order_relaxed)) {
      const CallMode mode = range.mode.load(memory_order_relaxed);
      CallPlan* const found = range.plan.load(memory_order_relaxed);
      // A slot re-registered meanwhile (another core loading another program) may have paired
      // this end with another range's begin and mode: then check, as an unregistered call.
      std::atomic_thread_fence(memory_order_acquire);
      if (range.end.load(memory_order_relaxed) != end) {
        return CallMode::kChecked;
      }
      *plan = found;
      return mode;
    }
  }
  return CallMode::kChecked;
}

CallContext::CallContext(executorch::runtime::KernelRuntimeContext& context, const void* arguments)
    : context_(context) {
  CallPlan* plan = nullptr;
  mode_ = call_mode(arguments, &plan);
  if (plan == nullptr || mode_ == CallMode::kChecked) {
    return;
  }
  if (mode_ == CallMode::kProven) {
    const size_t index = find_call(*plan, arguments);
    if (index < plan->count) {
      plan->next = index + 1 == plan->count ? 0 : index + 1;
      prepared_ = plan->calls[index].entry;
    }
    return;
  }
  plan_ = plan;  // a proof pass: this call takes the next entry
  index_ = plan->next++;
  if (index_ < plan->count) {
    plan->arguments[index_] = arguments;
  }
}

bool CallContext::prepared_agrees(
    const char* op, uint32_t kind, const void* derived, size_t bytes) {
  if (plan_ == nullptr) {
    return true;
  }
  const cortex_m_nn_prepared_call* call = index_ < plan_->count ? &plan_->calls[index_] : nullptr;
  if (call != nullptr && call->kind == kind &&
      (bytes == 0 || (call->entry != nullptr && std::memcmp(call->entry, derived, bytes) == 0))) {
    return true;
  }
  ET_LOG(
      Error,
      "cortex_m_nn::%s: prepared call %u (cortex_m_nn_model.c) differs from the program's call: "
      "regenerate it from this .pte with cortex-m-compile embed",
      op,
      static_cast<unsigned>(index_));
  context_.fail(executorch::runtime::Error::InvalidProgram);
  return false;
}

// Method::step(), in_progress() and reset_execution() carry ExecuTorch's deprecated
// (experimental) attribute; Zephyr builds with -Werror.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
executorch::runtime::Error prove(
    executorch::runtime::Method& method, const void* begin, const void* end,
    size_t* instruction, CallPlan* plan) {
  using executorch::runtime::Error;
  // Straight-line code is assumed, as cortex-m-compile writes it (no jump instructions): a
  // branch would be decided on data that check-only calls never computed.
  if (plan != nullptr) {
    plan->next = 0;
  }
  if (!set_call_mode(begin, end, CallMode::kCheckOnly, plan)) {
    return Error::MemoryAllocationFailed;
  }
  *instruction = 0;
  Error error = method.step();
  while (error == Error::Ok && method.in_progress()) {
    ++*instruction;
    error = method.step();
  }
  if (error == Error::Ok && plan != nullptr && plan->next != plan->count) {
    ET_LOG(Error, "cortex_m_nn: the prepared calls (cortex_m_nn_model.c) are %u, forward makes "
                  "%u: regenerate them from this .pte with cortex-m-compile embed",
           static_cast<unsigned>(plan->count), static_cast<unsigned>(plan->next));
    ++*instruction;
    error = Error::InvalidProgram;
  }
  if (error == Error::Ok) {
    error = method.reset_execution();
  }
  if (plan != nullptr) {
    plan->next = 0;
  }
  set_call_mode(begin, end, error == Error::Ok ? CallMode::kProven : CallMode::kChecked, plan);
  return error;
}
#pragma GCC diagnostic pop

}  // namespace cortex_m_nn
