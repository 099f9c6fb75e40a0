// libFuzzer target: a hostile model.pte against the whole runtime.
//
// Each input is a candidate program. It is copied into a heap buffer of
// exactly its size, 16-byte aligned (so AddressSanitizer sees a read one
// byte past its end), and goes through what an application does with it:
// Program::load (the flatbuffer verifier), arenas of the sizes the program
// asks for, Method::load (tensor bounds and every kernel's check), then one
// execute() over a fixed input pattern. The runtime's contract is that no
// input gets past the loads into a crash, a sanitizer finding or a hang.
//
// Work is capped so executions stay fast: a program asking for more than
// kMaxArenaBytes of arena is not loaded, and one whose estimated work (see
// estimated_work) exceeds kMaxWork loads but does not execute.
//
// Built by torchmcu.fuzz.build_fuzzer() (python -m torchmcu.fuzz). The
// project's runtime switch -DTORCHMCU_VERIFY=0 (trusted programs only:
// Verification::kMinimal) gives the deliberately broken variant the tests
// use to show the fuzzer finds bugs; -DTMCU_FUZZ_VERBOSE=1 prints what each
// input reached.
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <new>
#include <vector>

#include "core/kernel.h"
#include "core/method.h"
#include "core/program.h"

#ifndef TMCU_FUZZ_VERBOSE
#define TMCU_FUZZ_VERBOSE 0
#endif

namespace {

using torchmcu::ArenaSpan;
using torchmcu::Method;
using torchmcu::Program;
using torchmcu::TensorView;
namespace schema = torchmcu::schema;

constexpr uint64_t kMaxArenaBytes = uint64_t(1) << 20;  // all arenas together
constexpr uint64_t kMaxWork = uint64_t(1) << 21;         // ~multiply-accumulates

struct AlignedDelete {
  void operator()(uint8_t* p) const { operator delete[](p, std::align_val_t(16)); }
};
using AlignedBuffer = std::unique_ptr<uint8_t[], AlignedDelete>;

AlignedBuffer aligned_alloc16(size_t n) {
  // Exactly n bytes (1 for an empty input): ASan's redzone starts right after.
  return AlignedBuffer(static_cast<uint8_t*>(operator new[](n ? n : 1, std::align_val_t(16))));
}

// An upper estimate of the work of one execute(): every operand byte touched
// once, plus the multiply-accumulates of the ops whose work grows faster than
// their operands (convolutions, linear layers, pooling windows, matmuls).
// Only called on a loaded Method: every record and argument is checked.
uint64_t estimated_work(const Program& program) {
  const schema::Exec exec = program.root().exec();
  const auto ops = exec.ops();
  const schema::Operand* operands = exec.operands().data();
  const auto* args = reinterpret_cast<const uint32_t*>(exec.args().data());
  uint64_t work = 0;
  for (uint32_t i = 0; i < ops.size(); ++i) {
    const schema::ExecOp& op = ops[i];
    for (uint32_t k = 0; k < uint32_t(op.num_inputs) + op.num_outputs; ++k) {
      work += operands[op.operands + k].nbytes;
    }
    const uint32_t* a = args + op.args;
    uint64_t macs = 0;
    switch (op.code) {
      case schema::OpCode::CONV2D_F32:
      case schema::OpCode::DEPTHWISE_CONV2D_F32: {
        const auto& c = *reinterpret_cast<const schema::Conv2dArgs*>(a);
        macs = uint64_t(c.y[0]) * c.y[1] * c.y[2] * (uint64_t(c.w[0]) * c.w[1] * c.w[2] * c.w[3]);
        break;
      }
      case schema::OpCode::CONV2D_S8:
      case schema::OpCode::DEPTHWISE_CONV2D_S8: {
        const auto& c = *reinterpret_cast<const schema::QuantConv2dArgs*>(a);
        macs = uint64_t(c.y[0]) * c.y[1] * c.y[2] * (uint64_t(c.w[0]) * c.w[1] * c.w[2] * c.w[3]);
        break;
      }
      case schema::OpCode::LINEAR_F32: {
        const auto& l = *reinterpret_cast<const schema::LinearArgs*>(a);
        macs = uint64_t(l.x_rows) * l.w[0] * l.w[1];
        break;
      }
      case schema::OpCode::LINEAR_S8: {
        const auto& l = *reinterpret_cast<const schema::QuantLinearArgs*>(a);
        macs = uint64_t(l.x_rows) * l.w[0] * l.w[1];
        break;
      }
      case schema::OpCode::MAX_POOL2D_F32:
      case schema::OpCode::AVG_POOL2D_F32: {
        const auto& p = *reinterpret_cast<const schema::Pool2dArgs*>(a);
        macs = uint64_t(operands[op.operands + 1].nbytes) / 4 * uint64_t(p.kernel_h) * uint64_t(p.kernel_w);
        break;
      }
      case schema::OpCode::MAX_POOL2D_S8:
      case schema::OpCode::AVG_POOL2D_S8: {
        const auto& p = *reinterpret_cast<const schema::QuantPool2dArgs*>(a);
        macs = uint64_t(operands[op.operands + 1].nbytes) * uint64_t(p.kernel_h) * uint64_t(p.kernel_w);
        break;
      }
      case schema::OpCode::BATCH_MATMUL_F32:
      case schema::OpCode::BATCH_MATMUL_S8: {
        // y's elements times K (a's last dim).
        const auto* dims = reinterpret_cast<const int32_t*>(a);
        const schema::Operand& x = operands[op.operands];
        macs = uint64_t(operands[op.operands + 2].nbytes) * uint64_t(dims[x.rank - 1]);
        break;
      }
      case schema::OpCode::LSTM_F32:
      case schema::OpCode::GRU_F32:
      case schema::OpCode::RNN_F32:
      case schema::OpCode::LSTM_S8:
      case schema::OpCode::LSTM_S16:
      case schema::OpCode::GRU_S8:
      case schema::OpCode::GRU_S16:
      case schema::OpCode::RNN_S8:
      case schema::OpCode::RNN_S16: {
        // Every step of every batch reads both weight matrices (time_steps
        // and batch are the first two fields of every recurrent args struct).
        const auto* r = reinterpret_cast<const int32_t*>(a);
        macs = uint64_t(r[0]) * uint64_t(r[1]) *
               (uint64_t(operands[op.operands + 1].nbytes) + operands[op.operands + 2].nbytes);
        break;
      }
      default:
        break;
    }
    // Each term is below 2^62 for checked shapes (operands under 2^31 bytes,
    // windows under 2^17 a side); saturate the sum.
    work += macs;
    if (work > kMaxWork) return work;
  }
  return work;
}

// A fixed, deterministic input: small floats for float tensors, a byte ramp
// for the others.
void fill_input(const TensorView& v) {
  if (!v.present()) return;
  if (v.dtype == schema::DType::F32) {
    auto* f = v.as<float>();
    for (uint32_t i = 0; i < v.nbytes / 4; ++i) f[i] = float(int32_t(i % 17) - 8) * 0.125f;
  } else {
    auto* b = v.as<uint8_t>();
    for (uint32_t i = 0; i < v.nbytes; ++i) b[i] = uint8_t(i * 37u + 11u);
  }
}

void trace(const char* what, uint32_t code) {
  if (TMCU_FUZZ_VERBOSE) std::fprintf(stderr, "fuzz_program: %s 0x%02x\n", what, unsigned(code));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  AlignedBuffer buf = aligned_alloc16(size);
  if (size) std::memcpy(buf.get(), data, size);

  const auto program = Program::load(buf.get(), size);
  if (!program.ok()) {
    trace("program", uint32_t(program.error()));
    return 0;
  }
  const Program& p = program.get();

  const auto specs = p.root().arenas();
  if (specs.size() > torchmcu::kMaxArenas) {
    // Method::load refuses it before touching the arenas; give it none.
    const auto m = Method::load(p, nullptr, 0);
    trace("method (arena count)", uint32_t(m.error()));
    return 0;
  }
  uint64_t total = 0;
  for (uint32_t i = 0; i < specs.size(); ++i) total += specs[i].size();
  if (total > kMaxArenaBytes) {
    trace("skipped: arenas too large", 0);
    return 0;
  }
  std::vector<AlignedBuffer> storage;
  ArenaSpan arenas[torchmcu::kMaxArenas] = {};
  for (uint32_t i = 0; i < specs.size(); ++i) {
    const size_t n = specs[i].size();
    storage.push_back(aligned_alloc16(n));
    std::memset(storage.back().get(), 0, n ? n : 1);  // deterministic contents
    arenas[i] = ArenaSpan{storage.back().get(), n};
  }

  const auto method = Method::load(p, arenas, specs.size());
  if (!method.ok()) {
    trace("method", uint32_t(method.error()));
    return 0;
  }
  const Method& m = method.get();
  if (estimated_work(p) > kMaxWork) {
    trace("skipped: too much work", 0);
    return 0;
  }
  for (uint32_t i = 0; i < m.num_inputs(); ++i) fill_input(m.input(i));
  const torchmcu::Error err = m.execute();
  trace("executed", uint32_t(err));
  // Read the outputs, as an application would.
  volatile uint8_t sink = 0;
  for (uint32_t i = 0; i < m.num_outputs(); ++i) {
    const TensorView out = m.output(i);
    if (out.present() && out.nbytes > 0) sink = sink ^ out.as<uint8_t>()[out.nbytes - 1];
  }
  (void)sink;
  return 0;
}
