// Firmware entry: the compiled model (model_pte.h, model_arenas.h, generated
// by `torchmcu compile`) run over the io blob the simulator placed. A model
// compiled with --symbol NAME is built with -DTMCU_MODEL_SYMBOL=NAME.
#include "boards/platform.h"
#include "model_arenas.h"
#include "model_pte.h"
#include "torchmcu/torchmcu.h"

#ifdef TMCU_MODEL_SYMBOL
#define TMCU_PASTE3_(a, b, c) a##b##c
#define TMCU_PASTE3(a, b, c) TMCU_PASTE3_(a, b, c)  // expands TMCU_MODEL_SYMBOL first
#define TMCU_NAME(prefix, suffix) TMCU_PASTE3(prefix, TMCU_MODEL_SYMBOL, suffix)
#define TMCU_PTE TMCU_NAME(tmcu_, _pte)
#define TMCU_PTE_SIZE TMCU_NAME(tmcu_, _pte_size)
#define TMCU_ARENAS TMCU_NAME(tmcu_, _arenas)
#define TMCU_NUM_ARENAS (sizeof(TMCU_ARENAS) / sizeof(tmcu_arena))  // declared with its size
#else
#define TMCU_PTE tmcu_model_pte
#define TMCU_PTE_SIZE tmcu_model_pte_size
#define TMCU_ARENAS tmcu_model_arenas
#define TMCU_NUM_ARENAS TMCU_MODEL_NUM_ARENAS
#endif

int main() {
  tmcu_platform_init();
  return tmcu_app_run(TMCU_PTE, TMCU_PTE_SIZE, TMCU_ARENAS, TMCU_NUM_ARENAS, tmcu_platform_io_base(),
                      tmcu_platform_io_size());
}
