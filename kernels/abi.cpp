// What this kernel build is (cortex_m_nn/abi.h), and the check of a program against it, shared
// by the firmware API (src/model.cpp, also under the bare-metal runner). The Python host check
// (cortex_m_nn.check.host_kernels) compares the program's metadata with cortex_m_nn_kernels_abi().
#include "cortex_m_nn/abi.h"

#include <stdio.h>
#include <string.h>

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

// The value of the constant method `name` (added by cortex-m-compile) as text.
bool read_metadata(Program& program, MemoryAllocator& scratch, const char* name, char* out,
                   size_t size) {
  bool read = false;
  {
    MemoryManager manager(&scratch);
    Result<Method> method = program.load_method(name, &manager);
    if (method.ok() && method->outputs_size() == 1) {
      const EValue& value = method->get_output(0);
      if (value.isString()) {
        std::string_view text = value.toString();
        snprintf(out, size, "%.*s", static_cast<int>(text.size()), text.data());
        read = true;
      } else if (value.isInt()) {
        // %ld, not %lld: newlib-nano's printf (lean images) has no long long
        snprintf(out, size, "%ld", static_cast<long>(value.toInt()));
        read = true;
      }
    }
  }
  scratch.reset();
  return read;
}

}  // namespace

AbiCheck check_program_abi(Program& program, MemoryAllocator& scratch) {
  AbiCheck check{AbiStatus::kMatch, "", ""};
  char isa[16], rounding[16], ops_version[16];
  if (!read_metadata(program, scratch, "cortex_m_nn_isa", isa, sizeof(isa)) ||
      !read_metadata(program, scratch, "cortex_m_nn_rounding", rounding, sizeof(rounding)) ||
      !read_metadata(program, scratch, "cortex_m_nn_ops_version", ops_version,
                     sizeof(ops_version))) {
    check.status = AbiStatus::kNoTarget;
    snprintf(check.message, sizeof(check.message),
             "the .pte records no cortex_m_nn target (isa, rounding, operator version): "
             "compile it with cortex-m-compile");
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
