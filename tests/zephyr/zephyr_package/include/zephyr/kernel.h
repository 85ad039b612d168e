/* Stand-in for <zephyr/kernel.h> when compiling for a Cortex-M without Zephyr: declarations
 * of what the samples and src/executorch_pal_zephyr.cpp use, as Zephyr's headers declare them
 * (include/zephyr/kernel.h); nothing is linked. */
#ifndef CORTEX_M_NN_STAND_IN_ZEPHYR_KERNEL_H
#define CORTEX_M_NN_STAND_IN_ZEPHYR_KERNEL_H

#include <stddef.h>
#include <stdint.h>

/* From the build's autoconf.h in Zephyr (kernel/Kconfig's default for a Cortex-M SysTick). */
#ifndef CONFIG_SYS_CLOCK_TICKS_PER_SEC
#define CONFIG_SYS_CLOCK_TICKS_PER_SEC 10000
#endif

#ifdef __cplusplus
extern "C" {
#endif

uint32_t k_cycle_get_32(void);
int64_t k_uptime_ticks(void);
void k_fatal_halt(unsigned int reason) __attribute__((noreturn));
/* kernel/mempool.c: k_malloc exists only when the system heap is not empty; k_free always. */
void *k_malloc(size_t size);
void k_free(void *ptr);

#ifdef __cplusplus
}
#endif

/* Zephyr's k_panic() raises a kernel panic (a fatal error); here it halts. */
#define k_panic() k_fatal_halt(4)

#endif
