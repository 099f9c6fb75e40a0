// Generic Cortex-M startup: vector table, reset, fault reporting, and the
// few libc hooks (_exit, abort, assert) that would otherwise drag in stdio
// or syscalls. Section and symbol names match torchmcu.boards.linker_script.
#include <stddef.h>

#include <utility>

#include "cortex_m.h"
#include "platform.h"

// External interrupts in the vector table: 16 unless the board has a device
// interrupting above them (an NPU: TMCU_BOARD_NPU_IRQ, whose slot holds
// tmcu_npu_irq_handler). Torchmcu.boards.Board.defines sets both.
#ifndef TMCU_BOARD_NUM_IRQS
#define TMCU_BOARD_NUM_IRQS 16
#endif
#ifndef TMCU_BOARD_NPU_IRQ
#define TMCU_BOARD_NPU_IRQ (-1)
#endif
static_assert(TMCU_BOARD_NUM_IRQS >= 16 && TMCU_BOARD_NPU_IRQ < TMCU_BOARD_NUM_IRQS, "vector table size");

extern "C" {
// Defined by the generated linker script.
extern uint32_t __tmcu_stack_top[];
extern uint32_t __tmcu_stack_bottom[];
extern uint32_t __tmcu_data_load[];
extern uint32_t __tmcu_data_start[];
extern uint32_t __tmcu_data_end[];
extern uint32_t __tmcu_bss_start[];
extern uint32_t __tmcu_bss_end[];
typedef void (*tmcu_init_fn)(void);
extern tmcu_init_fn __tmcu_preinit_array_start[];
extern tmcu_init_fn __tmcu_preinit_array_end[];
extern tmcu_init_fn __tmcu_init_array_start[];
extern tmcu_init_fn __tmcu_init_array_end[];

// The program's main. Named through its assembler symbol because C++ forbids
// calling ::main.
int tmcu_program_main(void) __asm__("main");

void Reset_Handler(void) __attribute__((noreturn));
void HardFault_Handler(void) __attribute__((naked));
void SysTick_Handler(void);  // platform.cc
void tmcu_default_handler(void);  // not noreturn: the weak aliases of it may be overridden by handlers that return
void tmcu_fault_report(const uint32_t* frame, uint32_t exc_return) __attribute__((noreturn, used));

// Handlers nobody provides end in tmcu_default_handler; a program may
// override any of them with a strong definition.
void NMI_Handler(void) __attribute__((weak, alias("tmcu_default_handler")));
void SecureFault_Handler(void) __attribute__((weak, alias("tmcu_default_handler")));
void SVC_Handler(void) __attribute__((weak, alias("tmcu_default_handler")));
void DebugMon_Handler(void) __attribute__((weak, alias("tmcu_default_handler")));
void PendSV_Handler(void) __attribute__((weak, alias("tmcu_default_handler")));
void tmcu_irq_handler(void) __attribute__((weak, alias("tmcu_default_handler")));
// The NPU's interrupt (firmware/boards/npu/ with the Ethos-U driver).
void tmcu_npu_irq_handler(void) __attribute__((weak, alias("tmcu_default_handler")));
}

namespace {

using Handler = void (*)(void);

// Word 0 is the initial main stack pointer, then the exception handlers.
// A struct (instead of an array of function pointers) keeps the stack
// pointer a plain address constant, so the table is statically initialised.
struct VectorTable {
  void* initial_sp;
  Handler system[15];                     // exceptions 1..15
  Handler external[TMCU_BOARD_NUM_IRQS];  // IRQ 0..: only the NPU's is enabled, but a stray
                                          // one must land somewhere that reports it
};

// VTOR wants the table aligned to its size rounded up to a power of two.
constexpr size_t vector_alignment(size_t bytes) {
  size_t a = 128;
  while (a < bytes) a *= 2;
  return a;
}

template <size_t... I>
constexpr VectorTable make_vector_table(const Handler (&system)[15], std::index_sequence<I...>) {
  return VectorTable{__tmcu_stack_top,
                     {system[0], system[1], system[2], system[3], system[4], system[5], system[6], system[7],
                      system[8], system[9], system[10], system[11], system[12], system[13], system[14]},
                     {(int(I) == TMCU_BOARD_NPU_IRQ ? tmcu_npu_irq_handler : tmcu_irq_handler)...}};
}

constexpr Handler kSystemHandlers[15] = {
    Reset_Handler,        // 1  Reset
    NMI_Handler,          // 2  NMI
    HardFault_Handler,    // 3  HardFault
    HardFault_Handler,    // 4  MemManage (disabled: escalates anyway)
    HardFault_Handler,    // 5  BusFault
    HardFault_Handler,    // 6  UsageFault
    SecureFault_Handler,  // 7  SecureFault (Armv8-M), reserved before
    nullptr,              // 8  reserved
    nullptr,              // 9  reserved
    nullptr,              // 10 reserved
    SVC_Handler,          // 11 SVCall
    DebugMon_Handler,     // 12 DebugMonitor
    nullptr,              // 13 reserved
    PendSV_Handler,       // 14 PendSV
    SysTick_Handler,      // 15 SysTick
};

}  // namespace

extern "C" __attribute__((section(".vectors"), used)) alignas(vector_alignment(sizeof(VectorTable)))
const VectorTable tmcu_vector_table =
    make_vector_table(kSystemHandlers, std::make_index_sequence<TMCU_BOARD_NUM_IRQS>());

using namespace tmcu_board;

namespace {

// The stack's high-water mark, measured: Reset_Handler fills the stack below
// its own frame with this word before anything else runs; when main returns,
// the lowest word that no longer holds it is as deep as the stack ever went
// (a value equal to the pattern stored at the very bottom would be missed:
// one word in 2^32). torchmcu.builder.stack computes the bound this checks.
constexpr uint32_t kStackPaint = 0xC5AC5AC5u;

// Always inlined and through a volatile pointer: no call (whose frame would
// sit in the painted range) and no memset.
__attribute__((always_inline)) inline void paint_stack() {
  uint32_t* sp;
  __asm__ volatile("mov %0, sp" : "=r"(sp));
  for (volatile uint32_t* p = __tmcu_stack_bottom; p < sp; ++p) *p = kStackPaint;
}

// "tmcu: stack used=<bytes> size=<bytes>" (torchmcu.sim.runner reads it).
void report_stack() {
  const uint32_t* p = __tmcu_stack_bottom;
  while (p < __tmcu_stack_top && *p == kStackPaint) ++p;
  const uint32_t used = uint32_t(reinterpret_cast<uintptr_t>(__tmcu_stack_top) - reinterpret_cast<uintptr_t>(p));
  const uint32_t size = uint32_t(reinterpret_cast<uintptr_t>(__tmcu_stack_top) -
                                 reinterpret_cast<uintptr_t>(__tmcu_stack_bottom));
  uart_enable();
  write_str("tmcu: stack used=");
  write_dec(used);
  write_str(" size=");
  write_dec(size);
  write_str("\n");
}

}  // namespace

extern "C" void Reset_Handler(void) {
#if TMCU_BOARD_HAS_FPU || TMCU_BOARD_HAS_MVE
  // First, before any compiler-generated code could touch an FP or MVE
  // register (e.g. a vectorised copy loop below): grant CP10/CP11.
  reg32(kScbCpacr) |= kCpacrCp10Cp11Full;
  dsb_isb();
#endif
#if TMCU_ARMV8M_MAIN
  // Stack overflow becomes a UsageFault (STKOF) instead of silently
  // overwriting .bss, which the linker script puts right below the stack.
  __asm__ volatile("msr msplim, %0" ::"r"(__tmcu_stack_bottom));
#endif
  // Point VTOR at this table even if the reset value already does, so a
  // loader that entered elsewhere still gets our handlers.
  reg32(kScbVtor) = reinterpret_cast<uintptr_t>(&tmcu_vector_table);
  dsb_isb();

  paint_stack();
  for (uint32_t *src = __tmcu_data_load, *dst = __tmcu_data_start; dst < __tmcu_data_end;) *dst++ = *src++;
  for (uint32_t* dst = __tmcu_bss_start; dst < __tmcu_bss_end;) *dst++ = 0;

  for (tmcu_init_fn* f = __tmcu_preinit_array_start; f < __tmcu_preinit_array_end; ++f) (*f)();
  for (tmcu_init_fn* f = __tmcu_init_array_start; f < __tmcu_init_array_end; ++f) (*f)();

  // The UART and tick counter before main, so that an application may print
  // from its first line (tmcu_platform_init is idempotent).
  tmcu_platform_init();
  const int status = tmcu_program_main();
  report_stack();
  tmcu_platform_exit(status);
}

// Finds the exception frame (on MSP or PSP, per EXC_RETURN bit 2) and hands
// it to the reporter. Naked: no prologue may move SP before we read it.
extern "C" void HardFault_Handler(void) {
  __asm__ volatile(
#if TMCU_ARMV8M_MAIN
      // A stack overflow lands here with MSP at its limit: lift the limit so
      // the reporter's own frames do not fault again (and lock up).
      "movs r0, #0\n\t"
      "msr msplim, r0\n\t"
#endif
      "tst lr, #4\n\t"
      "ite eq\n\t"
      "mrseq r0, msp\n\t"
      "mrsne r0, psp\n\t"
      "mov r1, lr\n\t"
      "b tmcu_fault_report\n\t");
}

extern "C" void tmcu_fault_report(const uint32_t* frame, uint32_t exc_return) {
  uart_enable();
  // Basic frame: r0 r1 r2 r3 r12 lr pc xpsr.
  write_str("\r\n*** HardFault: pc=");
  write_hex32(frame[6]);
  write_str(" lr=");
  write_hex32(frame[5]);
  write_str(" xpsr=");
  write_hex32(frame[7]);
  write_str(" exc_return=");
  write_hex32(exc_return);
  write_str("\r\n*** cfsr=");
  write_hex32(reg32(kScbCfsr));
  write_str(" hfsr=");
  write_hex32(reg32(kScbHfsr));
  write_str(" mmfar=");
  write_hex32(reg32(kScbMmfar));
  write_str(" bfar=");
  write_hex32(reg32(kScbBfar));
  write_str("\r\n");
  tmcu_platform_exit(TMCU_EXIT_HARDFAULT);
}

extern "C" void tmcu_default_handler(void) {
  uint32_t ipsr;
  __asm__ volatile("mrs %0, ipsr" : "=r"(ipsr));
  uart_enable();
  write_str("\r\n*** unexpected exception ");
  write_dec(ipsr & 0x1FF);
  write_str("\r\n");
  tmcu_platform_exit(TMCU_EXIT_UNEXPECTED_EXCEPTION);
}

// libc hooks. Defining them here keeps newlib's versions, which need
// syscalls (_kill, _getpid) or stdio, out of the image.
extern "C" __attribute__((noreturn)) void _exit(int code) {
  tmcu_platform_exit(code);
}

extern "C" __attribute__((noreturn)) void abort(void) {
  uart_enable();
  write_str("\r\n*** abort\r\n");
  tmcu_platform_exit(TMCU_EXIT_ABORT);
}

extern "C" __attribute__((noreturn)) void __assert_func(const char* file, int line, const char* func,
                                                        const char* expr) {
  uart_enable();
  write_str("\r\n*** assertion failed: ");
  write_str(expr != nullptr ? expr : "?");
  write_str(" at ");
  write_str(file != nullptr ? file : "?");
  write_str(":");
  write_dec(static_cast<uint32_t>(line));
  if (func != nullptr) {
    write_str(" in ");
    write_str(func);
  }
  write_str("\r\n");
  tmcu_platform_exit(TMCU_EXIT_ABORT);
}
