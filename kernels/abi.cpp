// What this kernel build is (cortex_m_nn/abi.h), and the check of a program against it, shared
// by the firmware API (src/model.cpp, also under the bare-metal runner). The Python host check
// (cortex_m_nn.check.host_kernels) compares the program's metadata with cortex_m_nn_kernels_abi().
#include "cortex_m_nn/abi.h"

#include <stdio.h>
#include <string.h>

#include <string_view>

#include <executorch/runtime/executor/memory_manager.h>
#include <executorch/runtime/executor/method.h>

extern "C" const char* cortex_m_nn_kernels_abi(void) {
  return CORTEX_M_NN_ABI_TEXT;
}

namespace cortex_m_nn {
namespace {

using executorch::runtime::Error;
using executorch::runtime::EValue;
using executorch::runtime::MemoryAllocator;
using executorch::runtime::MemoryManager;
using executorch::runtime::Method;
using executorch::runtime::Program;
using executorch::runtime::Result;

// The records a program holds about its ABI: the constant method cortex_m_nn_metadata (added
// by cortex-m-compile), one "name=value" line per record. Each of `count` keys' values is copied
// into its buffer of `size` bytes; false unless every key has a record.
bool read_metadata(Program& program, MemoryAllocator& scratch, const char* const* keys,
                   char* const* values, size_t size, size_t count) {
  size_t found = 0;
  {
    MemoryManager manager(&scratch);
    Result<Method> method = program.load_method("cortex_m_nn_metadata", &manager);
    // (the output's value index checked first, by its meta: get_output would abort on a
    // damaged program's out-of-range index)
    if (method.ok() && method->outputs_size() == 1 &&
        method->method_meta().output_tag(0).ok() &&
        method->method_meta().output_tag(0).get() == executorch::runtime::Tag::String &&
        method->get_output(0).isString()) {
      const std::string_view text = method->get_output(0).toString();
      size_t start = 0;
      while (start < text.size()) {
        size_t end = text.find('\n', start);
        end = end == std::string_view::npos ? text.size() : end;
        // Not substr or compare(pos, …): their range checks link libstdc++'s throwing path.
        const std::string_view line(text.data() + start, end - start);
        for (size_t k = 0; k < count; ++k) {
          const size_t length = strlen(keys[k]);
          if (line.size() > length && memcmp(line.data(), keys[k], length) == 0 &&
              line[length] == '=') {
            snprintf(values[k], size, "%.*s", static_cast<int>(line.size() - length - 1),
                     line.data() + length + 1);
            ++found;
          }
        }
        start = end + 1;
      }
    }
  }
  scratch.reset();
  return found == count;
}

}  // namespace

AbiCheck check_program_abi(Program& program, MemoryAllocator& scratch) {
  AbiCheck check{AbiStatus::kMatch, "", ""};
  char isa[16], rounding[16], ops_version[16];
  const char* const keys[] = {"isa", "rounding", "ops_version"};
  char* const values[] = {isa, rounding, ops_version};
  if (!read_metadata(program, scratch, keys, values, sizeof(isa), 3)) {
    check.status = AbiStatus::kNoTarget;
    snprintf(check.message, sizeof(check.message),
             "the .pte records no cortex_m_nn target (isa, rounding, operator version): "
             "compile it with this cortex-m-compile");
    return check;
  }
  snprintf(check.program, sizeof(check.program), "isa=%s rounding=%s ops_version=%s", isa,
           rounding, ops_version);
  if (strcmp(check.program, abi::kText) == 0) {
    return check;
  }
  const char* fix;
  if (strcmp(isa, abi::kIsa) != 0) {
    fix = "recompile it with cortex-m-compile --target <core>+" CORTEX_M_NN_ABI_ISA_NAME;
  } else if (strcmp(rounding, abi::kRounding) != 0) {
    fix = "recompile it with cortex-m-compile --rounding " CORTEX_M_NN_ABI_ROUNDING_NAME
          ", or build the kernels with the .pte's rounding";
  } else {
    fix = "compile the model and build the kernels with the same cortex-m-nn release";
  }
  check.status = AbiStatus::kMismatch;
  snprintf(check.message, sizeof(check.message),
           "the .pte was compiled for %s but the kernels are %s: %s", check.program, abi::kText,
           fix);
  return check;
}

}  // namespace cortex_m_nn
