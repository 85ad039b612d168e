// FLATBUFFERS_ASSERT for ExecuTorch's runtime in firmware (cmake/executorch_runtime.cmake
// defines FLATBUFFERS_ASSERT=CORTEX_M_NN_FLATBUFFERS_CHECK and includes this file through
// FLATBUFFERS_ASSERT_INCLUDE, the hook flatbuffers/base.h provides for it).
//
// flatbuffers checks its accessors' indices (Vector::Get: `i < size()`) with assert() unless
// told otherwise. The C library's assert passes the expression, the file and the function's
// full signature to a printing handler: for the runtime's Vector::Get instances alone that is
// ~2.9 KB of strings and the formatted-printing code in every image. Here the check stays and a
// failing one ends in ExecuTorch's platform abort (et_pal_abort, which every firmware build
// provides), with no strings.
#pragma once

#include <executorch/runtime/platform/platform.h>

#define CORTEX_M_NN_FLATBUFFERS_CHECK(condition) ((condition) ? (void)0 : et_pal_abort())
