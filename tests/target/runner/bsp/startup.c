/* Minimal Cortex-M startup for qemu bare-metal runs (semihosting I/O). */
#include <stdint.h>
#include <stdlib.h>
#include "semihost.h"

extern uint32_t __data_load__, __data_start__, __data_end__, __bss_start__, __bss_end__, __StackTop;
extern int main(void);
extern void initialise_monitor_handles(void);
extern void __libc_init_array(void);

void Reset_Handler(void) __attribute__((noreturn, used));
void Reset_Handler(void)
{
    uint32_t *src = &__data_load__, *dst = &__data_start__;
    if (src != dst) while (dst < &__data_end__) *dst++ = *src++;
    for (dst = &__bss_start__; dst < &__bss_end__;) *dst++ = 0;
#if defined(__ARM_FP) || defined(__ARM_FEATURE_MVE)
    /* Enable CP10/CP11 (FPU and, on v8.1-M, MVE) full access. */
    *(volatile uint32_t *)0xE000ED88 |= (0xFu << 20);
    __asm volatile("dsb\n\tisb" ::: "memory");
#endif
    initialise_monitor_handles();
    __libc_init_array(); /* static constructors: ExecuTorch kernel registration */
    int rc = main();
    sh_exit(rc);
}

static void fault(const char *msg, uint32_t code)
{
    sh_write0(msg);
    sh_exit(code);
}
void HardFault_Handler(void) { fault("*** HardFault\n", 0x7d); }
void Default_Handler(void) { fault("*** unexpected exception\n", 0x7e); }
void NMI_Handler(void) __attribute__((weak, alias("Default_Handler")));
void MemManage_Handler(void) __attribute__((weak, alias("Default_Handler")));
void BusFault_Handler(void) __attribute__((weak, alias("Default_Handler")));
void UsageFault_Handler(void) __attribute__((weak, alias("Default_Handler")));
void SecureFault_Handler(void) __attribute__((weak, alias("Default_Handler")));
void SVC_Handler(void) __attribute__((weak, alias("Default_Handler")));
void PendSV_Handler(void) __attribute__((weak, alias("Default_Handler")));
void SysTick_Handler(void) __attribute__((weak, alias("Default_Handler")));

__attribute__((section(".vectors"), used)) const void *const __vectors[16] = {
    &__StackTop, Reset_Handler, NMI_Handler, HardFault_Handler,
    MemManage_Handler, BusFault_Handler, UsageFault_Handler, SecureFault_Handler,
    0, 0, 0, SVC_Handler, Default_Handler, 0, PendSV_Handler, SysTick_Handler,
};

/* -nostartfiles drops crti/crtn: provide the hooks newlib's init/fini arrays expect. */
void _init(void) {}
/* crtbegin's handle for __cxa_atexit (static destructors), also dropped by -nostartfiles. */
void *__dso_handle = 0;
void _fini(void) {}
