// The ranges of argument storage whose calls a proof pass covers, and the proof pass
// (cortex_m_nn/call_mode.h). The ranges are written only while a program loads; every kernel
// call reads them.
#include "cortex_m_nn/call_mode.h"

#include <cstdint>

#include <executorch/runtime/executor/method.h>

namespace cortex_m_nn {
namespace {

struct Range {
  uintptr_t begin = 0;
  uintptr_t end = 0;  // empty slot: begin == end
  CallMode mode = CallMode::kChecked;
};

Range ranges[kCallModeRanges];

}  // namespace

bool set_call_mode(const void* begin, const void* end, CallMode mode) {
  const uintptr_t from = reinterpret_cast<uintptr_t>(begin);
  const uintptr_t to = reinterpret_cast<uintptr_t>(end);
  Range* free_slot = nullptr;
  for (Range& range : ranges) {
    if (range.begin == from && range.end == to) {
      range.mode = mode;
      if (mode == CallMode::kChecked) {
        range = Range{};
      }
      return true;
    }
    if (free_slot == nullptr && range.begin == range.end) {
      free_slot = &range;
    }
  }
  if (mode == CallMode::kChecked) {
    return true;  // unregistered ranges are checked already
  }
  if (free_slot == nullptr || from >= to) {
    return false;
  }
  *free_slot = Range{from, to, mode};
  return true;
}

CallMode call_mode(const void* arguments) {
  const uintptr_t at = reinterpret_cast<uintptr_t>(arguments);
  for (const Range& range : ranges) {
    if (at >= range.begin && at < range.end) {
      return range.mode;
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
