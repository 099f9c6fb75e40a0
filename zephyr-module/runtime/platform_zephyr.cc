// The platform functions of firmware/boards/platform.h on Zephyr: bytes to
// the console UART, the kernel's cycle counter (monotonic), exit through semihosting (or
// parking the thread), and fatal errors turned into exit statuses. The io
// window (tmcu_platform_io_base/size) is defined by the generated model_io.c
// of the model hook: on Zephyr it is the input compiled into the image.
#include <zephyr/device.h>
#include <zephyr/drivers/uart.h>
#include <zephyr/kernel.h>
#include <zephyr/sys/printk.h>

#if __has_include(<zephyr/version.h>)
#include <zephyr/version.h>
#else
#include <version.h>  // Zephyr before 3.2 generates it without the prefix
#endif

#ifdef CONFIG_TORCHMCU_LOG
#include "app/app.h"
#include "core/error.h"

// log_zephyr.c: the log module's messages.
extern "C" void tmcu_zephyr_log_exit(int status, const char* name);
extern "C" void tmcu_zephyr_log_fatal(unsigned int reason);
#endif

#include "boards/platform.h"

namespace {

#if defined(CONFIG_UART_CONSOLE) && DT_HAS_CHOSEN(zephyr_console)
#define TMCU_CONSOLE_UART 1
const struct device* const g_console = DEVICE_DT_GET(DT_CHOSEN(zephyr_console));
#endif

#ifdef CONFIG_TORCHMCU_LOG
const char* status_name(int status) {
  if (status == torchmcu::app::kStatusBadIo) return "bad io blob";
  return torchmcu::error_name(static_cast<torchmcu::Error>(status));
}
#endif

#ifdef CONFIG_TORCHMCU_SEMIHOSTING_EXIT
// Semihosting SYS_EXIT_EXTENDED (operation 0x20): r1 points at the pair
// {ADP_Stopped_ApplicationExit (0x20026), status}, and a semihosting host
// such as QEMU exits with that status. BKPT 0xAB is the M-profile trap.
[[noreturn]] void semihosting_exit(int status) {
  static volatile uint32_t block[2];
  block[0] = 0x20026u;
  block[1] = static_cast<uint32_t>(status);
  register uint32_t r0 __asm__("r0") = 0x20u;
  register volatile uint32_t* r1 __asm__("r1") = block;
  __asm__ volatile("bkpt 0xab" : "+r"(r0) : "r"(r1) : "memory");
  for (;;) {  // no semihosting host answered: stay here
    k_cpu_idle();
  }
}
#endif

}  // namespace

#ifdef CONFIG_TORCHMCU_ETHOS_U
// The Ethos-U delegate's question before each call: is an NPU registered with
// the driver? Zephyr's Ethos-U driver (drivers/misc/ethos_u) starts every
// enabled "arm,ethos-u" devicetree node at POST_KERNEL, before main(): it
// calls ethosu_init, connects the interrupt and provides the driver's mutex
// and semaphore hooks. Starting it again here would register the NPU twice,
// so the answer is only whether that device is ready.
extern "C" int tmcu_platform_npu_status(void) {
#if DT_HAS_COMPAT_STATUS_OKAY(arm_ethos_u)
  return device_is_ready(DEVICE_DT_GET(DT_COMPAT_GET_ANY_STATUS_OKAY(arm_ethos_u))) ? 0 : -1;
#else
  return -1;  // no NPU in the devicetree: the delegate fails its calls cleanly
#endif
}
#endif

extern "C" void tmcu_platform_init(void) {
  // Nothing to start: the kernel owns the console and the cycle counter.
}

extern "C" void tmcu_platform_write(const char* s, size_t n) {
  // Raw bytes, no newline translation, straight to the console UART: the
  // line protocol must not be reformatted or dropped by the logging backend.
#ifdef TMCU_CONSOLE_UART
  if (device_is_ready(g_console)) {
    for (size_t i = 0; i < n; ++i) uart_poll_out(g_console, static_cast<unsigned char>(s[i]));
    return;
  }
#endif
  printk("%.*s", static_cast<int>(n), s);
}

// Ticks are Zephyr's hardware cycle counter: k_cycle_get_64/_32, counting
// sys_clock_hw_cycles_per_sec() per second (CONFIG_SYS_CLOCK_HW_CYCLES_PER_SEC;
// on Cortex-M with the SysTick driver, the core clock SysTick counts). They
// never go backwards: the SysTick driver's counter (cycle_count + what the
// current reload has counted) can read a few cycles lower than a read just
// before it around a reload, and such a step is held, not taken as a wrap.
extern "C" uint64_t tmcu_platform_ticks(void) {
  const unsigned int key = irq_lock();
#ifdef CONFIG_TIMER_HAS_64BIT_CYCLE_COUNTER
  static uint64_t last;
  const uint64_t now = k_cycle_get_64();
  if (now > last) last = now;
  const uint64_t ticks = last;
#else
  // The 32-bit counter extended: the step since the last reading is taken
  // modulo 2^32, so a wrap is a small forward step; a "step" of 2^31 or more
  // is the counter reading a little lower than before, and is held. Correct
  // while readings are less than 2^31 cycles apart (67 s at 32 MHz), which
  // the app's per-op and per-inference readings are.
  static bool started;
  static uint32_t last;
  static uint64_t total;
  const uint32_t now = k_cycle_get_32();
  if (!started) {  // the first reading: the counter as it is, whatever its value
    started = true;
    last = now;
    total = now;
  }
  const uint32_t step = now - last;
  if (step < 0x80000000u) {
    total += step;
    last = now;
  }
  const uint64_t ticks = total;
#endif
  irq_unlock(key);
  return ticks;
}

extern "C" void tmcu_platform_exit(int code) {
#ifdef CONFIG_TORCHMCU_LOG
  tmcu_zephyr_log_exit(code, status_name(code));
#endif
#ifdef CONFIG_TORCHMCU_SEMIHOSTING_EXIT
  semihosting_exit(code);
#else
  for (;;) {
    k_sleep(K_FOREVER);
  }
#endif
}

#ifdef CONFIG_TORCHMCU_SEMIHOSTING_EXIT
// A fatal error (CPU fault, k_panic, k_oops, failed __ASSERT) would halt the
// system and leave a simulator running until its time limit: end it with the
// board layer's statuses instead. The exception frame's type was renamed in
// Zephyr 3.7.
#if KERNEL_VERSION_NUMBER >= 0x030700
using tmcu_esf = struct arch_esf;
#else
using tmcu_esf = z_arch_esf_t;
#endif

extern "C" void k_sys_fatal_error_handler(unsigned int reason, const tmcu_esf* esf) {
  ARG_UNUSED(esf);
#ifdef CONFIG_TORCHMCU_LOG
  tmcu_zephyr_log_fatal(reason);
#endif
  const bool cpu_fault = reason == K_ERR_CPU_EXCEPTION || reason == K_ERR_SPURIOUS_IRQ ||
                         reason == K_ERR_STACK_CHK_FAIL;
  semihosting_exit(cpu_fault ? TMCU_EXIT_HARDFAULT : TMCU_EXIT_ABORT);
}
#endif
