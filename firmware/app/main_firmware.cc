// Firmware entry: the compiled model (model_pte.h, model_arenas.h, generated
// by `torchmcu compile`) run over the io blob the simulator placed. A model
// compiled with --symbol NAME is built with -DTMCU_MODEL_SYMBOL=NAME.
#include "boards/platform.h"
#include "model_arenas.h"
#include "model_pte.h"
#include "torchmcu/torchmcu.h"

#ifndef TMCU_MODEL_SYMBOL
#define TMCU_MODEL_SYMBOL model
#endif
#define TMCU_PASTE3_(a, b, c) a##b##c
#define TMCU_PASTE3(a, b, c) TMCU_PASTE3_(a, b, c)  // expands TMCU_MODEL_SYMBOL first
#define TMCU_NAME(prefix, suffix) TMCU_PASTE3(prefix, TMCU_MODEL_SYMBOL, suffix)

int main() {
  tmcu_platform_init();
  return tmcu_app_run(TMCU_NAME(tmcu_, _pte), TMCU_NAME(tmcu_, _pte_size), TMCU_NAME(tmcu_, _arenas),
                      sizeof(TMCU_NAME(tmcu_, _arenas)) / sizeof(tmcu_arena), tmcu_platform_io_base(),
                      tmcu_platform_io_size());
}
