// The kernel interface. A kernel is two functions: `check` runs once when
// the method is loaded and refuses operands or arguments it cannot run
// safely; `run` executes the op and trusts everything `check` accepted.
//
// Both see the op through an OpContext: its record in the program's
// executable section (schema::ExecOp), its operands (schema::Operand: where
// each lies, its bytes, dtype and rank) and its kernel arguments (the
// *Args struct program.fbs gives for its op code: shapes and parameters,
// precomputed ahead of time). All of it is read in place from the program;
// nothing is copied, looked up or unpacked per op.
//
// Before `check` runs, Method::load has checked every operand on its own:
// its location names a region the method has, its dtype is known, its rank
// at most kMaxRank, its bytes are aligned for its dtype and lie inside its
// region, outputs are in arenas, and outputs overlap no input (but as the
// kernel's `inplace` mask allows). `check` checks the rest: operand counts,
// dtypes and ranks, that each operand's bytes match the dims in the
// arguments, and the arguments themselves.
//
// Tensor *values* are data: no check reads them, and every kernel is
// defined for any values (out-of-range shifts are clamped, accumulators
// wrap), so weights may also live in RAM (Program.init_copies).
//
// The table of kernels is generated per build from the program's op list
// (selective build): entries the model does not use are null, so their code
// is never linked. There is no registration and no string lookup.
#ifndef TORCHMCU_CORE_KERNEL_H_
#define TORCHMCU_CORE_KERNEL_H_

#include <cstdint>

#include "core/config.h"
#include "core/error.h"
#include "core/program_generated.h"
#include "core/tensor.h"

// Accessors and checks of a few instructions, used once per operand at load
// and per op at run: inlined, they cost what they compute and no call.
#if defined(__GNUC__)
#define TMCU_INLINE inline __attribute__((always_inline))
#else
#define TMCU_INLINE inline
#endif

namespace torchmcu {

constexpr uint32_t kMaxInputs = 8;
constexpr uint32_t kMaxOutputs = 2;
constexpr uint32_t kMaxArenas = 4;

/// schema::Operand::location: where an operand's bytes are.
constexpr uint8_t kLocAbsent = 0;    // an optional operand left out
constexpr uint8_t kLocConstant = 1;  // the constant segment (read only)
constexpr uint8_t kLocArena0 = 2;    // arena k is kLocArena0 + k
constexpr uint8_t kLocNoTensor = 255;  // the op names no tensor: refused
constexpr uint32_t kNumLocations = kLocArena0 + kMaxArenas;

/// The base address of each location; null for kLocAbsent and for arenas
/// the program has not.
struct Regions {
  uint8_t* base[kNumLocations] = {};
};

class OpContext {
 public:
  OpContext(const Regions& regions, const schema::ExecOp& op, const schema::Operand* operands,
            const uint32_t* args)
      : regions_(regions), op_(op), operands_(operands), args_(args) {}

  TMCU_INLINE uint32_t num_inputs() const { return op_.num_inputs; }
  TMCU_INLINE uint32_t num_outputs() const { return op_.num_outputs; }
  TMCU_INLINE uint32_t num_args() const { return op_.num_args; }
  TMCU_INLINE schema::OpParams params_type() const { return schema::OpParams(op_.params_type); }

  TMCU_INLINE const schema::Operand& input(uint32_t k) const { return operands_[k]; }
  TMCU_INLINE const schema::Operand& output(uint32_t k) const { return operands_[op_.num_inputs + k]; }
  static TMCU_INLINE bool present(const schema::Operand& o) { return o.location != kLocAbsent; }

  /// An operand's bytes; null for an absent one.
  template <typename T>
  TMCU_INLINE T* data(const schema::Operand& o) const {
    return reinterpret_cast<T*>(regions_.base[o.location] + o.offset);
  }
  template <typename T>
  TMCU_INLINE T* in(uint32_t k) const {
    return data<T>(input(k));
  }
  template <typename T>
  TMCU_INLINE T* out(uint32_t k) const {
    return data<T>(output(k));
  }

  /// The kernel arguments as their struct; check() first makes sure that
  /// num_args() covers it.
  template <typename A>
  TMCU_INLINE const A& args() const {
    return *reinterpret_cast<const A*>(args_);
  }
  TMCU_INLINE const uint32_t* arg_words() const { return args_; }

 private:
  const Regions& regions_;
  const schema::ExecOp& op_;
  const schema::Operand* operands_;
  const uint32_t* args_;
};

/// A kernel's load-time check. In a runtime built for trusted programs only
/// (TORCHMCU_VERIFY=0) nothing calls checks: the member keeps no pointer,
/// so their code is left out of the image, and calling one accepts.
#if TORCHMCU_VERIFY
using CheckFn = Error (*)(const OpContext& ctx);
#else
struct CheckFn {
  constexpr CheckFn(Error (*)(const OpContext&)) {}  // NOLINT: implicit, as the pointer
  constexpr CheckFn(decltype(nullptr)) {}            // NOLINT
  constexpr Error operator()(const OpContext&) const { return Error::Ok; }
};
#endif

struct Kernel {
  CheckFn check;
  /// Null for a delegate, which runs through `invoke`.
  void (*run)(const OpContext& ctx);
  /// Bit i set: output 0 may be input i itself (the same bytes exactly), for
  /// element-wise kernels where each output element depends only on the
  /// same-index input elements and is written after they are read. Any other
  /// overlap between an output and an input is refused when the method loads.
  uint32_t inplace = 0;
  /// A delegate's run: hardware behind a driver can fail however well its
  /// operands were checked (a bus error, an NPU fault), so it returns an
  /// error (Error::DelegateFailed) that Method::execute passes on. Set
  /// exactly when `run` is null.
  Error (*invoke)(const OpContext& ctx) = nullptr;
};

/// Kernel::inplace masks come from the op table: each kernel folder's generated
/// kernels.h has inplace::kName (bit k: input k may be the output's bytes).

/// Indexed by schema::OpCode; defined by the generated kernel table.
extern const Kernel* const kKernelTable[schema::kNumOpCode];

}  // namespace torchmcu

#endif  // TORCHMCU_CORE_KERNEL_H_
