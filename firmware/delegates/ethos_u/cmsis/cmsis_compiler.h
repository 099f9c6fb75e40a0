/* The hints of CMSIS-Core's cmsis_compiler.h that the Ethos-U core driver
 * uses (ethosu_driver.c: its default semaphore waits with WFE, wakes with
 * SEV), for builds without CMSIS-Core (TORCHMCU_CMSIS_CORE_DIR unset; see
 * torchmcu.backends.ethos_u.build). Each is the Armv7-M/Armv8-M instruction of that name. */
#ifndef TORCHMCU_DELEGATES_ETHOS_U_CMSIS_COMPILER_H_
#define TORCHMCU_DELEGATES_ETHOS_U_CMSIS_COMPILER_H_

#define __WFE() __asm__ volatile("wfe" ::: "memory")
#define __SEV() __asm__ volatile("sev" ::: "memory")
#define __DSB() __asm__ volatile("dsb 0xf" ::: "memory")
#define __ISB() __asm__ volatile("isb 0xf" ::: "memory")
#define __DMB() __asm__ volatile("dmb 0xf" ::: "memory")

#endif
