// The few Cortex-M system registers the board code touches, written from the
// Armv7-M / Armv8-M Architecture Reference Manuals (System Control Space at
// 0xE000E000). Internal to firmware/boards/.
#ifndef TORCHMCU_BOARDS_CORTEX_M_H_
#define TORCHMCU_BOARDS_CORTEX_M_H_

#include <stdint.h>

#if !defined(__ARM_ARCH_7M__) && !defined(__ARM_ARCH_7EM__) && \
    !defined(__ARM_ARCH_8M_MAIN__) && !defined(__ARM_ARCH_8_1M_MAIN__)
// The fault handler and ticks() use Thumb-2 instructions (ite, mrs primask
// with cpsid) that Armv6-M / Armv8-M Baseline lack.
#error "firmware/boards supports Armv7-M, Armv7E-M and Armv8(.1)-M Mainline cores only"
#endif

#if defined(__ARM_ARCH_8M_MAIN__) || defined(__ARM_ARCH_8_1M_MAIN__)
#define TMCU_ARMV8M_MAIN 1
#else
#define TMCU_ARMV8M_MAIN 0
#endif

#ifndef TMCU_BOARD_UART_BASE
#error "compile firmware/boards with the board's -D flags (torchmcu.boards.Board.define_flags)"
#endif

namespace tmcu_board {

inline volatile uint32_t& reg32(uintptr_t address) {
  return *reinterpret_cast<volatile uint32_t*>(address);
}

// SysTick: a 24-bit down counter reloaded from RVR when it passes zero.
constexpr uintptr_t kSystCsr = 0xE000E010;  // control and status
constexpr uintptr_t kSystRvr = 0xE000E014;  // reload value
constexpr uintptr_t kSystCvr = 0xE000E018;  // current value (write clears)
constexpr uint32_t kSystCsrEnable = 1u << 0;
constexpr uint32_t kSystCsrTickInt = 1u << 1;
constexpr uint32_t kSystCsrClkSourceCpu = 1u << 2;  // count the core clock
                                                    // (QEMU's refclk is 0 Hz on
                                                    // the SSE boards)

// Data Watchpoint and Trace unit: the cycle counter, enabled through the
// Debug Exception and Monitor Control Register. DWT_LAR unlocks the DWT on
// cores that implement the CoreSight lock (Cortex-M7); elsewhere it reads
// as zero and ignores writes.
constexpr uintptr_t kDemcr = 0xE000EDFC;
constexpr uint32_t kDemcrTrcEna = 1u << 24;
constexpr uintptr_t kDwtCtrl = 0xE0001000;
constexpr uint32_t kDwtCtrlCycCntEna = 1u << 0;
constexpr uint32_t kDwtCtrlNoCycCnt = 1u << 25;  // no cycle counter implemented
constexpr uintptr_t kDwtCyccnt = 0xE0001004;
constexpr uintptr_t kDwtLar = 0xE0001FB0;
constexpr uint32_t kDwtLarKey = 0xC5ACCE55;

// System Control Block.
constexpr uintptr_t kScbIcsr = 0xE000ED04;
constexpr uint32_t kIcsrPendStSet = 1u << 26;  // SysTick exception pending
constexpr uintptr_t kScbVtor = 0xE000ED08;
constexpr uintptr_t kScbCfsr = 0xE000ED28;   // configurable fault status
constexpr uintptr_t kScbHfsr = 0xE000ED2C;   // HardFault status
constexpr uintptr_t kScbMmfar = 0xE000ED34;  // MemManage fault address
constexpr uintptr_t kScbBfar = 0xE000ED38;   // BusFault address
constexpr uintptr_t kScbCpacr = 0xE000ED88;  // coprocessor access control
// CP10 and CP11 (FPU and MVE) full access: two bits each at 20..23.
constexpr uint32_t kCpacrCp10Cp11Full = 0xFu << 20;

// CMSDK APB UART, the UART on every MPS2/MPS3 image.
struct CmsdkUart {
  volatile uint32_t data;       // write: transmit a byte
  volatile uint32_t state;      // bit 0: transmit buffer full
  volatile uint32_t ctrl;       // bit 0: transmitter enable
  volatile uint32_t intstatus;  // write 1 to clear
  volatile uint32_t bauddiv;    // clock / baud, at least 16
};
constexpr uint32_t kUartStateTxFull = 1u << 0;
constexpr uint32_t kUartCtrlTxEnable = 1u << 0;

inline CmsdkUart& uart0() {
  return *reinterpret_cast<CmsdkUart*>(static_cast<uintptr_t>(TMCU_BOARD_UART_BASE));
}

// The board's UART, by register layout (torchmcu.boards.UART_KINDS):
// 0 the CMSDK UART above, 1 ST's USART of the F1/F2/F4 series (RM0090),
// 2 ST's LPUART/USART of the L4/L5/G4/H7 series (RM0438).
#ifndef TMCU_BOARD_UART_KIND
#define TMCU_BOARD_UART_KIND 0
#endif

// ST USART, F4 layout: status, data, baud rate, control 1.
constexpr uintptr_t kStUsartSr = 0x00;
constexpr uintptr_t kStUsartDr = 0x04;
constexpr uintptr_t kStUsartBrr = 0x08;
constexpr uintptr_t kStUsartCr1 = 0x0C;
constexpr uint32_t kStUsartSrTxe = 1u << 7;   // transmit data register empty
constexpr uint32_t kStUsartCr1Ue = 1u << 13;  // USART enable
constexpr uint32_t kStUsartCr1Te = 1u << 3;   // transmitter enable

// ST LPUART, L5 layout: control 1 first, interrupt status and transmit data apart.
constexpr uintptr_t kStLpuartCr1 = 0x00;
constexpr uintptr_t kStLpuartBrr = 0x0C;
constexpr uintptr_t kStLpuartIsr = 0x1C;
constexpr uintptr_t kStLpuartTdr = 0x28;
constexpr uint32_t kStLpuartIsrTxe = 1u << 7;  // TXE (TXFNF with the FIFO on): room for a byte
constexpr uint32_t kStLpuartCr1Ue = 1u << 0;
constexpr uint32_t kStLpuartCr1Te = 1u << 3;

inline void dsb_isb() {
  __asm__ volatile("dsb 0xf\n\tisb 0xf" ::: "memory");
}

// Internal helpers shared by startup.cc and platform.cc.
void uart_enable();                            // idempotent
void write_str(const char* s);                 // NUL-terminated
void write_hex32(uint32_t v);                  // "0x" + 8 digits
void write_dec(uint32_t v);

}  // namespace tmcu_board

#endif  // TORCHMCU_BOARDS_CORTEX_M_H_
