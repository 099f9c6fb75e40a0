// The Ethos-U delegate's run half: one call of the Ethos-U core driver per
// inference (ethosu_reserve_driver, ethosu_invoke_v3, ethosu_release_driver)
// with a base pointer per region of the blob: its read-only data in place
// in the program, the planned scratch and fast scratch, and the planned
// input and output buffers themselves (copied through the scratch only for
// a blob compiled without I/O regions of their own). No heap; the driver's
// job state lives in the board's driver object (firmware/boards/npu/).
//
// The NPU's PMU counts each call: its cycle counter and the data beats on
// its two AXI ports (U55/U65: AXI0 is the SRAM port, AXI1 the external,
// flash-side one; U85: SRAM and EXT), kept for tmcu_delegate_take_sample.
#include <cstring>

#include "delegates/ethos_u/blob.h"
#include "delegates/ethos_u/kernels.h"
#include "ethosu_driver.h"
#include "pmu_ethosu.h"
#include "torchmcu/torchmcu.h"

/// From the board's NPU support (firmware/boards/npu/): 0 once the driver is
/// initialised and registered.
extern "C" int tmcu_platform_npu_status(void);

namespace torchmcu {
namespace ethos_u {
namespace {

#if defined(ETHOSU85)
constexpr ethosu_pmu_event_type kEvents[] = {ETHOSU_PMU_SRAM_RD_DATA_BEAT_RECEIVED,
                                             ETHOSU_PMU_SRAM_WR_DATA_BEAT_WRITTEN,
                                             ETHOSU_PMU_EXT_RD_DATA_BEAT_RECEIVED};
#else
constexpr ethosu_pmu_event_type kEvents[] = {ETHOSU_PMU_AXI0_RD_DATA_BEAT_RECEIVED,
                                             ETHOSU_PMU_AXI0_WR_DATA_BEAT_WRITTEN,
                                             ETHOSU_PMU_AXI1_RD_DATA_BEAT_RECEIVED};
#endif
constexpr const char* kEventNames[] = {"sram_rd_beats", "sram_wr_beats", "ext_rd_beats"};
constexpr uint32_t kNumEvents = sizeof(kEvents) / sizeof(kEvents[0]);
static_assert(kNumEvents <= TMCU_DELEGATE_MAX_COUNTERS && kNumEvents <= ETHOSU_PMU_NCOUNTERS, "PMU counters");

// The last call's figures; `fresh` until taken. Written by the driver's
// inference_end callback (thread context, inside ethosu_invoke_v3).
struct Measure {
  tmcu_delegate_sample sample;
  bool fresh;
};
Measure g_measure;

uintptr_t address(const void* p) { return reinterpret_cast<uintptr_t>(p); }

Error invoke(const OpContext& ctx) {
  // Checked at load (check): a well-formed blob, operands matching it.
  const uint8_t* blob = ctx.in<const uint8_t>(0);
  const Header h = decode_header(blob);
  if (tmcu_platform_npu_status() != 0) return Error::DelegateFailed;  // no NPU: reserving would wait forever

  uint64_t base[kMaxRegions] = {};
  size_t size[kMaxRegions] = {};
  uint32_t regions = 0;
  auto set = [&](uint32_t region, const void* p, uint32_t n) {
    base[region] = address(p);
    size[region] = n;
    if (region + 1 > regions) regions = region + 1;
  };
  set(h.read_only_region, blob + h.read_only_offset, h.read_only_bytes);
  uint8_t* scratch = OpContext::present(ctx.input(1)) ? ctx.in<uint8_t>(1) : nullptr;
  if (h.scratch_bytes != 0) set(h.scratch_region, scratch, h.scratch_bytes);
  if (h.fast_scratch_bytes != 0) set(h.fast_scratch_region, ctx.in<uint8_t>(2), h.fast_scratch_bytes);
  const bool own = (h.flags & kFlagIoRegions) != 0;
  for (uint32_t k = 0; k < h.num_inputs + h.num_outputs; ++k) {
    const IoEntry e = io_entry(blob, k);
    const bool input = k < h.num_inputs;
    uint8_t* data = input ? ctx.in<uint8_t>(kFirstIo + k) : ctx.out<uint8_t>(k - h.num_inputs);
    if (own) {
      set(e.region, data, e.nbytes);
    } else if (input) {
      std::memcpy(scratch + e.offset, data, e.nbytes);
    }
  }

  g_measure.sample.partition = uint32_t(ctx.args<schema::EthosUArgs>().partition);
  ethosu_driver* drv = ethosu_reserve_driver();
  if (drv == nullptr) return Error::DelegateFailed;
  const int status = ethosu_invoke_v3(drv, blob + h.command_offset, int(h.command_bytes), base, size,
                                      int(regions), &g_measure);
  ethosu_release_driver(drv);
  if (status != 0) return Error::DelegateFailed;

  if (!own) {
    for (uint32_t k = 0; k < h.num_outputs; ++k) {
      const IoEntry e = io_entry(blob, h.num_inputs + k);
      std::memcpy(ctx.out<uint8_t>(k), scratch + e.offset, e.nbytes);
    }
  }
  return Error::Ok;
}

}  // namespace

const Kernel kEthosU = {check, nullptr, 0, invoke};

}  // namespace ethos_u
}  // namespace torchmcu

using torchmcu::ethos_u::g_measure;
using torchmcu::ethos_u::kEventNames;
using torchmcu::ethos_u::kEvents;
using torchmcu::ethos_u::kNumEvents;

// The driver's callbacks around each command stream (weak in the driver):
// the PMU counts from the start of the stream to its end.
extern "C" void ethosu_inference_begin(struct ethosu_driver* drv, void* user_arg) {
  if (user_arg != &g_measure) return;
  ETHOSU_PMU_Enable(drv);
  for (uint32_t i = 0; i < kNumEvents; ++i) ETHOSU_PMU_Set_EVTYPER(drv, i, kEvents[i]);
  ETHOSU_PMU_CYCCNT_Reset(drv);
  ETHOSU_PMU_EVCNTR_ALL_Reset(drv);
  ETHOSU_PMU_CNTR_Enable(drv, ETHOSU_PMU_CCNT_Msk | ((1u << kNumEvents) - 1u));
}

extern "C" void ethosu_inference_end(struct ethosu_driver* drv, void* user_arg) {
  if (user_arg != &g_measure) return;
  ETHOSU_PMU_CNTR_Disable(drv, ETHOSU_PMU_CCNT_Msk | ((1u << kNumEvents) - 1u));
  tmcu_delegate_sample& s = g_measure.sample;
  s.cycles = ETHOSU_PMU_Get_CCNTR(drv);
  s.num_counters = kNumEvents;
  for (uint32_t i = 0; i < kNumEvents; ++i) {
    s.counters[i] = ETHOSU_PMU_Get_EVCNTR(drv, i);
    s.names[i] = kEventNames[i];
  }
  ETHOSU_PMU_Disable(drv);
  g_measure.fresh = true;
}

extern "C" int tmcu_delegate_take_sample(tmcu_delegate_sample* out) {
  if (!g_measure.fresh) return 0;
  *out = g_measure.sample;
  g_measure.fresh = false;
  return 1;
}
