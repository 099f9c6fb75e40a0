// Board support for an Ethos-U beside the core (boards with an [npu] table:
// the Corstone-300/310/320 systems): the driver object, its start at
// platform init, the NPU's interrupt, and the driver's heap-free OS hooks.
// Built with the Ethos-U core driver only (torchmcu.backends.ethos_u.build), with the
// board's -D flags: TMCU_BOARD_NPU_BASE (register block) and
// TMCU_BOARD_NPU_IRQ (its external interrupt number; startup.cc puts
// tmcu_npu_irq_handler in that slot of the vector table).
//
// The core runs Secure and privileged (startup.cc), so the NPU is started in
// that state: its bus accesses may then reach the Secure aliases the plan
// uses for the arenas and the program.
#include "boards/cortex_m.h"
#include "boards/platform.h"
#include "ethosu_driver.h"

#if !defined(TMCU_BOARD_NPU_BASE) || !defined(TMCU_BOARD_NPU_IRQ)
#error "compile the NPU board support with the board's -D flags (an [npu] table)"
#endif

namespace {

using tmcu_board::reg32;

ethosu_driver g_npu;
int g_status = -1;  // ethosu_init's result: 0 once the NPU is registered

// NVIC interrupt set-enable registers, one bit per external interrupt.
constexpr uintptr_t kNvicIser = 0xE000E100;
// Cache maintenance by address (Armv8-M, to the point of coherency): the
// data cache's line and the registers taking an address.
constexpr uintptr_t kScbCcr = 0xE000ED14;
constexpr uint32_t kCcrDataCache = 1u << 16;
constexpr uintptr_t kDcimvac = 0xE000EF5C;   // invalidate
constexpr uintptr_t kDccimvac = 0xE000EF70;  // clean and invalidate
constexpr uint32_t kCacheLine = 32;

// The driver's semaphores without a heap: one for the driver list and one
// per driver, counted; taken in thread mode, given from the NPU's interrupt.
struct Semaphore {
  volatile uint32_t count;
};
constexpr uint32_t kSemaphores = 2;
Semaphore g_semaphores[kSemaphores];
uint32_t g_num_semaphores = 0;

void by_line(uintptr_t reg, uint64_t base, size_t n) {
  const uintptr_t lo = uintptr_t(base) & ~uintptr_t(kCacheLine - 1);
  const uintptr_t hi = uintptr_t(base) + n;
  for (uintptr_t a = lo; a < hi; a += kCacheLine) reg32(reg) = uint32_t(a);
}

void by_region(uintptr_t reg, const uint64_t* base, const size_t* size, int n) {
  // Nothing to keep coherent while the data cache is off (startup leaves it
  // off; an application may turn it on).
  if ((reg32(kScbCcr) & kCcrDataCache) == 0) return;
  __asm__ volatile("dsb 0xf" ::: "memory");
  for (int i = 0; i < n; ++i) {
    if (size[i] != 0) by_line(reg, base[i], size[i]);
  }
  tmcu_board::dsb_isb();
}

}  // namespace

extern "C" void tmcu_platform_npu_init(void) {
  static bool started = false;
  if (started) return;
  started = true;
  g_status = ethosu_init(&g_npu, reinterpret_cast<void*>(uintptr_t(TMCU_BOARD_NPU_BASE)), nullptr, 0,
                         /*secure_enable=*/1, /*privilege_enable=*/1);
  if (g_status == 0) {
    reg32(kNvicIser + 4 * (TMCU_BOARD_NPU_IRQ / 32)) = 1u << (TMCU_BOARD_NPU_IRQ % 32);
  }
}

extern "C" int tmcu_platform_npu_status(void) {
  return g_status;
}

extern "C" void tmcu_npu_irq_handler(void) {
  ethosu_irq_handler(&g_npu);
}

// -- the driver's hooks (weak in the driver) ---------------------------------------------------

extern "C" void* ethosu_semaphore_create(void) {
  if (g_num_semaphores == kSemaphores) return nullptr;
  Semaphore* s = &g_semaphores[g_num_semaphores++];
  s->count = 0;
  return s;
}

extern "C" void ethosu_semaphore_destroy(void*) {}

// Waits for the interrupt without a timeout (the core has no timer to bound
// it here): a give between the test and the WFE sets the event register, so
// the WFE does not sleep through it.
extern "C" int ethosu_semaphore_take(void* sem, uint64_t) {
  Semaphore* s = static_cast<Semaphore*>(sem);
  for (;;) {
    uint32_t primask;
    __asm__ volatile("mrs %0, primask\n\tcpsid i" : "=r"(primask)::"memory");
    const uint32_t n = s->count;
    if (n != 0) s->count = n - 1;
    __asm__ volatile("msr primask, %0" ::"r"(primask) : "memory");
    if (n != 0) return 0;
    __asm__ volatile("wfe");
  }
}

extern "C" int ethosu_semaphore_give(void* sem) {
  Semaphore* s = static_cast<Semaphore*>(sem);
  uint32_t primask;
  __asm__ volatile("mrs %0, primask\n\tcpsid i" : "=r"(primask)::"memory");
  s->count = s->count + 1;
  __asm__ volatile("msr primask, %0" ::"r"(primask) : "memory");
  __asm__ volatile("dsb 0xf\n\tsev" ::: "memory");
  return 0;
}

// Before a command stream: write back and drop the cached lines of every
// region (the NPU reads memory, not the cache); after it: drop them again,
// so the core reads what the NPU wrote.
extern "C" void ethosu_flush_dcache(const uint64_t* base, const size_t* size, int n) {
  by_region(kDccimvac, base, size, n);
}

extern "C" void ethosu_invalidate_dcache(const uint64_t* base, const size_t* size, int n) {
  by_region(kDcimvac, base, size, n);
}
