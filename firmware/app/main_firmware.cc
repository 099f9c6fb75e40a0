// Firmware entry: the compiled model (model_pte.h, model_arenas.h, generated
// by `torchmcu compile`) run over the io blob the simulator placed.
#include "boards/platform.h"
#include "model_arenas.h"
#include "model_pte.h"
#include "torchmcu/torchmcu.h"

int main() {
  tmcu_platform_init();
  return tmcu_app_run(tmcu_model_pte, tmcu_model_pte_size, tmcu_model_arenas,
                      TMCU_MODEL_NUM_ARENAS, tmcu_platform_io_base(), tmcu_platform_io_size());
}
