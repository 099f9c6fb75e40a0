// The Ethos-U delegate as a kernel of the generated kernel table (op code
// ETHOS_U): `check` is ethos_u::check (blob.h) and runs when the method
// loads; `invoke` drives the NPU through the Ethos-U core driver, once per
// inference. Built only when the program uses it and the driver is known
// (TORCHMCU_ETHOSU_DRIVER_DIR; torchmcu.backends.ethos_u.build).
#ifndef TORCHMCU_DELEGATES_ETHOS_U_KERNELS_H_
#define TORCHMCU_DELEGATES_ETHOS_U_KERNELS_H_

#include "core/kernel.h"

namespace torchmcu {
namespace ethos_u {

extern const Kernel kEthosU;

}  // namespace ethos_u
}  // namespace torchmcu

#endif  // TORCHMCU_DELEGATES_ETHOS_U_KERNELS_H_
