// The ranges of argument storage whose calls a proof pass covers, and the proof pass
// (cortex_m_nn/call_mode.h). The ranges are written only while a program loads; every kernel
// call reads them.
#include "cortex_m_nn/call_mode.h"

#include <atomic>
#include <cstdint>

#include <executorch/runtime/executor/method.h>

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
};

Range ranges[kCallModeRanges];

// Fills an empty slot (end 0), end last.
void publish(Range& range, uintptr_t from, uintptr_t to, CallMode mode) {
  range.mode.store(mode, memory_order_relaxed);
  range.begin.store(from, memory_order_relaxed);
  range.end.store(to, memory_order_release);
}

}  // namespace

bool set_call_mode(const void* begin, const void* end, CallMode mode) {
  const uintptr_t from = reinterpret_cast<uintptr_t>(begin);
  const uintptr_t to = reinterpret_cast<uintptr_t>(end);
  Range* free_slot = nullptr;
  for (Range& range : ranges) {
    const uintptr_t range_end = range.end.load(memory_order_acquire);
    if (range_end == to && range.begin.load(memory_order_relaxed) == from) {
      if (mode == CallMode::kChecked) {
        range.end.store(0, memory_order_release);  // forget it: unregistered calls check
      } else {
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
  publish(*free_slot, from, to, mode);
  return true;
}

CallMode call_mode(const void* arguments) {
  const uintptr_t at = reinterpret_cast<uintptr_t>(arguments);
  for (const Range& range : ranges) {
    const uintptr_t end = range.end.load(memory_order_acquire);
    if (at < end && at >= range.begin.load(memory_order_relaxed)) {
      const CallMode mode = range.mode.load(memory_order_relaxed);
      // A slot re-registered meanwhile (another core loading another program) may have paired
      // this end with another range's begin and mode: then check, as an unregistered call.
      std::atomic_thread_fence(memory_order_acquire);
      return range.end.load(memory_order_relaxed) == end ? mode : CallMode::kChecked;
    }
  }
  return CallMode::kChecked;
}

// Method::step(), in_progress() and reset_execution() carry ExecuTorch's deprecated
// (experimental) attribute; Zephyr builds with -Werror.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
executorch::runtime::Error prove(
    executorch::runtime::Method& method, const void* begin, const void* end,
    size_t* instruction) {
  using executorch::runtime::Error;
  // Straight-line code is assumed, as cortex-m-compile writes it (no jump instructions): a
  // branch would be decided on data that check-only calls never computed.
  if (!set_call_mode(begin, end, CallMode::kCheckOnly)) {
    return Error::MemoryAllocationFailed;
  }
  *instruction = 0;
  Error error = method.step();
  while (error == Error::Ok && method.in_progress()) {
    ++*instruction;
    error = method.step();
  }
  if (error == Error::Ok) {
    error = method.reset_execution();
  }
  set_call_mode(begin, end, error == Error::Ok ? CallMode::kProven : CallMode::kChecked);
  return error;
}
#pragma GCC diagnostic pop

}  // namespace cortex_m_nn
