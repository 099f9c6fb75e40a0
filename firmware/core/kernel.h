// The kernel interface. A kernel is two functions: `check` runs once when
// the method is loaded and refuses operands or parameters it cannot run
// safely; `run` executes the op and trusts everything `check` accepted.
//
// The table of kernels is generated per build from the program's op list
// (selective build): entries the model does not use are null, so their code
// is never linked. There is no registration and no string lookup.
#ifndef TORCHMCU_CORE_KERNEL_H_
#define TORCHMCU_CORE_KERNEL_H_

#include <cstdint>

#include "core/error.h"
#include "core/program_generated.h"
#include "core/tensor.h"

namespace torchmcu {

constexpr uint32_t kMaxInputs = 8;
constexpr uint32_t kMaxOutputs = 2;

struct OpContext {
  schema::Op op;
  const TensorView* inputs;
  uint32_t num_inputs;
  const TensorView* outputs;
  uint32_t num_outputs;
};

struct Kernel {
  Error (*check)(const OpContext& ctx);
  void (*run)(const OpContext& ctx);
};

/// Indexed by schema::OpCode; defined by the generated kernel table.
extern const Kernel* const kKernelTable[schema::kNumOpCode];

}  // namespace torchmcu

#endif  // TORCHMCU_CORE_KERNEL_H_
