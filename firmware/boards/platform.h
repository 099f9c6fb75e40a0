// Board platform interface: the only hardware the runtime talks to.
//
// Implemented in firmware/boards/ for every board described in boards/*.toml
// and compiled with the board's -D macros (torchmcu.boards.Board.defines).
// Nothing here allocates; every function may be called before static
// constructors run, and from any exception handler.
#ifndef TORCHMCU_BOARDS_PLATFORM_H_
#define TORCHMCU_BOARDS_PLATFORM_H_

#include <stddef.h>
#include <stdint.h>

// Exit codes the board code itself uses, chosen high so they do not collide
// with ordinary program results. torchmcu.sim.EXIT_CODES mirrors them.
#define TMCU_EXIT_HARDFAULT 250             // HardFault (and escalated faults)
#define TMCU_EXIT_UNEXPECTED_EXCEPTION 251  // an exception nobody handles
#define TMCU_EXIT_ABORT 252                 // abort() or a failed assert()

#ifdef __cplusplus
extern "C" {
#endif

// Starts the UART transmitter and the SysTick counter. Idempotent: a second
// call neither resets the tick count nor reconfigures the UART.
void tmcu_platform_init(void);

// Writes n raw bytes to the UART, blocking while its buffer is full. No
// newline translation.
void tmcu_platform_write(const char* s, size_t n);

// Monotonic count of core clock cycles since tmcu_platform_init(), extended
// to 64 bits: the DWT cycle counter where the core has one that counts (on
// hardware), else SysTick's count of the core clock. Safe with interrupts
// masked and inside handlers. Under QEMU (no DWT counter) with -icount
// shift=0 one tick is Board.instructions_per_tick guest instructions.
// Other platforms: on Zephyr (zephyr-module/runtime/platform_zephyr.cc) the
// kernel's hardware cycle counter, sys_clock_hw_cycles_per_sec() ticks per
// second (on Cortex-M the SysTick's clock), held, never stepping back; on
// Arduino (boards/arduino/) micros(), microseconds.
uint64_t tmcu_platform_ticks(void);

// Ends the simulation with `code` as the simulator's exit status
// (semihosting SYS_EXIT_EXTENDED). Never returns.
void tmcu_platform_exit(int code) __attribute__((noreturn));

// The io window: a memory range the runner fills with an input blob before
// reset (QEMU -device loader). Zeros when the runner passed no blob.
const uint8_t* tmcu_platform_io_base(void);
size_t tmcu_platform_io_size(void);

#ifdef __cplusplus
}  // extern "C"
#endif

#endif  // TORCHMCU_BOARDS_PLATFORM_H_
