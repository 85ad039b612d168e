/* Host stand-in for <zephyr/kernel.h>: only what the cortex-m-nn samples use. */
#ifndef CORTEX_M_NN_HOST_ZEPHYR_KERNEL_H
#define CORTEX_M_NN_HOST_ZEPHYR_KERNEL_H

#include <stdint.h>
#include <time.h>

/* A free-running counter (nanoseconds here; the board's cycle counter on a target). */
static inline uint32_t k_cycle_get_32(void)
{
	struct timespec now;
	clock_gettime(CLOCK_MONOTONIC, &now);
	return (uint32_t)(now.tv_sec * 1000000000ULL + (uint64_t)now.tv_nsec);
}

#endif
