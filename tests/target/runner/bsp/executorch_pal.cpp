// ExecuTorch's platform hooks for the bare-metal QEMU images that run its runtime (the runner
// and the ExecuTorch peer of the benchmark): log lines go to semihosting stdout, and an abort
// ends the image with exit status 2 (a setup error, as the images' own failures).
#include <cstdio>
#include <cstdlib>

#include <executorch/runtime/platform/platform.h>

extern "C" void et_pal_emit_log_message(et_timestamp_t, et_pal_log_level_t level, const char* file,
                                        const char*, size_t line, const char* message, size_t) {
  std::printf("ET %c %s:%u %s\n", static_cast<char>(level), file, static_cast<unsigned>(line),
              message);
}

extern "C" void et_pal_abort(void) {
  std::printf("ExecuTorch aborted\n");
  std::exit(2);
}
