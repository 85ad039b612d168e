// ExecuTorch's platform layer (runtime/platform/platform.h) for a Zephyr image whose runtime
// cortex-m-nn builds (cmake/zephyr_module.cmake without CONFIG_EXECUTORCH). It follows
// ExecuTorch's own Zephyr layer (runtime/platform/default/zephyr.cpp) but for memory: that one
// allocates with k_malloc, which exists only with CONFIG_HEAP_MEM_POOL_SIZE > 0. The runtime
// allocates from the planned allocators src/model.cpp gives it (Program::load's temporary
// memory included), so here there is no heap behind et_pal_allocate: it returns nullptr and a
// request fails visibly at load instead of taking RAM no plan counted.
#include <zephyr/kernel.h>
#include <zephyr/sys/printk.h>

#include <executorch/runtime/platform/platform.h>

extern "C" {

void et_pal_init(void) {}

ET_NORETURN void et_pal_abort(void) {
  printk("ExecuTorch aborted\n");
  k_panic();
  for (;;) {
  }
}

et_timestamp_t et_pal_current_ticks(void) { return static_cast<et_timestamp_t>(k_uptime_ticks()); }

et_tick_ratio_t et_pal_ticks_to_ns_multiplier(void) {
  return {1000000000ULL, static_cast<uint64_t>(CONFIG_SYS_CLOCK_TICKS_PER_SEC)};
}

void et_pal_emit_log_message(et_timestamp_t, et_pal_log_level_t level, const char* filename,
                             const char*, size_t line, const char* message, size_t) {
  printk("ET %c %s:%u %s\n", static_cast<char>(level), filename, static_cast<unsigned>(line),
         message);
}

void* et_pal_allocate(size_t) { return nullptr; }

void et_pal_free(void*) {}

}  // extern "C"
