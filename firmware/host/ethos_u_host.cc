// The Ethos-U delegate on a host, which has no NPU: the kernel-table entry
// of a host runner built for delegate tests (tests/test_ethos_u_delegate.py).
// Its `check` is the delegate's own (delegates/ethos_u/blob.cc, the code the
// firmware runs when a program loads); its `invoke` reports that no NPU is
// there, as the firmware does when the NPU did not start.
#include "delegates/ethos_u/blob.h"
#include "delegates/ethos_u/kernels.h"

namespace torchmcu {
namespace ethos_u {
namespace {

Error no_npu(const OpContext&) { return Error::DelegateFailed; }

}  // namespace

const Kernel kEthosU = {check, nullptr, 0, no_npu};

}  // namespace ethos_u
}  // namespace torchmcu
