// Platform functions of platform.h for the MPS2/MPS3 boards: CMSDK UART,
// a cycle counter extended to 64 bits (the DWT's where it counts, else
// SysTick's), semihosting exit and the io window.
#include "platform.h"

#include "cortex_m.h"

namespace tmcu_board {
namespace {

// SysTick period in ticks. The longest 24-bit period keeps the wrap
// interrupt rare (every 2^24 cycles, ~0.5 s at 32 MHz), so it hardly
// disturbs instruction counts. Tests may shorten it to exercise the wrap.
#ifndef TMCU_SYSTICK_PERIOD
#define TMCU_SYSTICK_PERIOD 0x1000000u
#endif
constexpr uint32_t kPeriod = TMCU_SYSTICK_PERIOD;
static_assert(kPeriod >= 2 && kPeriod <= 0x1000000u, "SysTick reload is 24 bits");

// Ticks accumulated by completed SysTick periods. Only SysTick_Handler
// writes it; readers mask interrupts, so the 64-bit value is never torn.
volatile uint64_t g_wrapped_ticks = 0;
bool g_uart_ready = false;
bool g_systick_started = false;

// The DWT cycle counter, when the core has one that counts: exact cycles
// without an interrupt. QEMU does not model it (it reads 0), so there the
// SysTick count, which follows the instruction count under -icount, is
// used. Its 32 bits are extended by the reads: SysTick_Handler reads it at
// least every kPeriod cycles, well within its 2^32-cycle wrap.
bool g_dwt = false;
uint32_t g_dwt_last = 0;
uint64_t g_dwt_high = 0;

uint64_t dwt_ticks() {  // interrupts masked by the caller
  const uint32_t now = reg32(kDwtCyccnt);
  if (now < g_dwt_last) g_dwt_high += uint64_t(1) << 32;
  g_dwt_last = now;
  return g_dwt_high | now;
}

void dwt_start() {
  reg32(kDemcr) = reg32(kDemcr) | kDemcrTrcEna;
  dsb_isb();
  if (reg32(kDwtCtrl) & kDwtCtrlNoCycCnt) return;
  reg32(kDwtLar) = kDwtLarKey;
  reg32(kDwtCyccnt) = 0;
  reg32(kDwtCtrl) = reg32(kDwtCtrl) | kDwtCtrlCycCntEna;
  dsb_isb();
  for (volatile int i = 0; i < 8; i = i + 1) {
  }
  g_dwt = reg32(kDwtCyccnt) != 0;  // it moved: it counts
}

}  // namespace

void uart_enable() {
  if (g_uart_ready || TMCU_BOARD_UART_BASE == 0) return;  // 0: a board without a UART
  [[maybe_unused]] constexpr uintptr_t base = TMCU_BOARD_UART_BASE;
  // The peripheral's clock and pins are the part's own start-up code's
  // business on hardware (RCC, GPIO alternate functions); simulators need neither.
#if TMCU_BOARD_UART_KIND == 1
  reg32(base + kStUsartBrr) = TMCU_BOARD_CLOCK_HZ / 115200u;  // oversampling by 16
  reg32(base + kStUsartCr1) = kStUsartCr1Ue | kStUsartCr1Te;
#elif TMCU_BOARD_UART_KIND == 2
  reg32(base + kStLpuartBrr) = static_cast<uint32_t>((256ull * TMCU_BOARD_CLOCK_HZ) / 115200u);  // LPUART: 256 fck / baud
  reg32(base + kStLpuartCr1) = kStLpuartCr1Ue | kStLpuartCr1Te;
#else
  CmsdkUart& u = uart0();
  // QEMU ignores the rate but flags divisors below 16 as guest errors.
  u.bauddiv = TMCU_BOARD_CLOCK_HZ / 115200u;
  u.ctrl = kUartCtrlTxEnable;  // without it the UART drops every byte
#endif
  g_uart_ready = true;
}

void write_str(const char* s) {
  size_t n = 0;
  while (s[n] != '\0') ++n;
  tmcu_platform_write(s, n);
}

void write_hex32(uint32_t v) {
  char buf[10] = {'0', 'x'};
  for (int i = 0; i < 8; ++i) buf[2 + i] = "0123456789abcdef"[(v >> (28 - 4 * i)) & 0xF];
  tmcu_platform_write(buf, sizeof buf);
}

void write_dec(uint32_t v) {
  char buf[10];
  int i = sizeof buf;
  do {
    buf[--i] = static_cast<char>('0' + v % 10);
    v /= 10;
  } while (v != 0);
  tmcu_platform_write(buf + i, sizeof buf - i);
}

}  // namespace tmcu_board

using namespace tmcu_board;

extern "C" void SysTick_Handler(void) {
  g_wrapped_ticks = g_wrapped_ticks + kPeriod;
  if (g_dwt) dwt_ticks();  // catches every wrap of the DWT's 32 bits
}

// Starts the NPU's driver (firmware/boards/npu/), when the firmware has one:
// weak, so it is null in builds without an NPU.
extern "C" void tmcu_platform_npu_init(void) __attribute__((weak));

extern "C" void tmcu_platform_init(void) {
  uart_enable();
  if (tmcu_platform_npu_init != nullptr) tmcu_platform_npu_init();
  if (!g_systick_started) {
    dwt_start();
    reg32(kSystCsr) = 0;
    reg32(kSystRvr) = kPeriod - 1;
    reg32(kSystCvr) = 0;  // any write clears the counter: start a fresh period
    reg32(kSystCsr) = kSystCsrEnable | kSystCsrTickInt | kSystCsrClkSourceCpu;
    g_systick_started = true;
  }
}

extern "C" void tmcu_platform_write(const char* s, size_t n) {
  // A board described without a UART (no [qemu] table, e.g. a part of one's own
  // whose output the application does its own way): nothing to write to.
  if (TMCU_BOARD_UART_BASE == 0) return;
  [[maybe_unused]] constexpr uintptr_t base = TMCU_BOARD_UART_BASE;
  for (size_t i = 0; i < n; ++i) {
#if TMCU_BOARD_UART_KIND == 1
    while (!(reg32(base + kStUsartSr) & kStUsartSrTxe)) {
    }
    reg32(base + kStUsartDr) = static_cast<uint8_t>(s[i]);
#elif TMCU_BOARD_UART_KIND == 2
    while (!(reg32(base + kStLpuartIsr) & kStLpuartIsrTxe)) {
    }
    reg32(base + kStLpuartTdr) = static_cast<uint8_t>(s[i]);
#else
    CmsdkUart& u = uart0();
    while (u.state & kUartStateTxFull) {
    }
    u.data = static_cast<uint8_t>(s[i]);
#endif
  }
}

extern "C" uint64_t tmcu_platform_ticks(void) {
  // Mask interrupts so that SysTick_Handler cannot run between reading the
  // accumulated count and the counter; a wrap in that window is then visible
  // as a pending SysTick exception instead, and accounted for here.
  uint32_t primask;
  __asm__ volatile("mrs %0, primask\n\tcpsid i" : "=r"(primask)::"memory");
  if (g_dwt) {
    const uint64_t cycles = dwt_ticks();
    __asm__ volatile("msr primask, %0" ::"r"(primask) : "memory");
    return cycles;
  }
  uint64_t base = g_wrapped_ticks;
  uint32_t value = reg32(kSystCvr);
  if (reg32(kScbIcsr) & kIcsrPendStSet) {
    // The counter passed zero but the handler has not run: re-read the
    // counter, which is now certainly in the new period, and add the period
    // the handler will add.
    value = reg32(kSystCvr);
    base += kPeriod;
  }
  __asm__ volatile("msr primask, %0" ::"r"(primask) : "memory");
  // The counter runs period-1 ... 1, 0 and the wrap is counted when it
  // reaches 0, so the elapsed part of the current period is (period - value)
  // modulo the period: 1 just after the reload, 0 at the zero crossing.
  return base + (kPeriod - value) % kPeriod;
}

extern "C" void tmcu_platform_exit(int code) {
#if TMCU_BOARD_EXIT_LINE
  // Renode has no semihosting on Cortex-M: the runner reads the status here
  // and stops the simulation (torchmcu.sim.renode).
  uart_enable();
  write_str("tmcu: exit status=");
  write_dec(static_cast<uint32_t>(code));
  write_str("\r\n");
#endif
  // Semihosting SYS_EXIT_EXTENDED (0x20): r1 points at {reason, subcode};
  // reason ADP_Stopped_ApplicationExit (0x20026) makes the subcode the exit
  // status. BKPT 0xAB is the M-profile semihosting trap.
  static volatile uint32_t block[2];
  block[0] = 0x20026u;
  block[1] = static_cast<uint32_t>(code);
  register uint32_t r0 __asm__("r0") = 0x20u;
  register volatile uint32_t* r1 __asm__("r1") = block;
  __asm__ volatile("bkpt 0xab" : "+r"(r0) : "r"(r1) : "memory");
  // Only reached without a semihosting host: stay parked.
  for (;;) {
    __asm__ volatile("wfi");
  }
}

extern "C" const uint8_t* tmcu_platform_io_base(void) {
  return reinterpret_cast<const uint8_t*>(static_cast<uintptr_t>(TMCU_BOARD_IO_BASE));
}

extern "C" size_t tmcu_platform_io_size(void) {
  return TMCU_BOARD_IO_SIZE;
}
