"""Vela (the `ethos-u-vela` package) compiling a TOSA graph for an Ethos-U.

Vela 5 reads TOSA 1.0 flatbuffers itself (its C++ core, Regor, behind
`ethosu.regor.compile`), so no .tflite detour is needed. We ask for the raw
output format: the command stream, the read-only data (encoded weights and
biases), the scratch and fast-scratch sizes, and where each input and output
lives. With separate I/O regions every graph input and output gets a base
pointer of its own (regions 3, 4, ...), so the runtime hands the NPU the
planned buffers themselves and nothing is copied in or out; the scratch then
holds only the partition's intermediate tensors.

Region numbers are those of the Ethos-U driver's base-pointer table: 0 the
read-only data, 1 the scratch, 2 the fast scratch (the U65/U85 cache; unused
in Shared_Sram mode), 3 and up the I/O tensors.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

SYSTEMS_INI = Path(__file__).with_name("systems.ini")

# Vela's accelerator configs: Regor's architecture name and MACs per cycle.
ACCELERATORS: dict[str, tuple[str, int]] = {
    "ethos-u55-32": ("EthosU55", 32), "ethos-u55-64": ("EthosU55", 64), "ethos-u55-128": ("EthosU55", 128),
    "ethos-u55-256": ("EthosU55", 256), "ethos-u65-256": ("EthosU65", 256), "ethos-u65-512": ("EthosU65", 512),
    "ethos-u85-128": ("EthosU85", 128), "ethos-u85-256": ("EthosU85", 256), "ethos-u85-512": ("EthosU85", 512),
    "ethos-u85-1024": ("EthosU85", 1024), "ethos-u85-2048": ("EthosU85", 2048),
}

# Driver base-pointer regions (see the module docstring).
REGION_READ_ONLY = 0
REGION_SCRATCH = 1
REGION_FAST_SCRATCH = 2
MAX_REGIONS = 8  # base pointers an Ethos-U command stream can address


class VelaError(RuntimeError):
    """Vela refused a graph; the message is Vela's."""


def available() -> bool:
    try:
        from ethosu import regor  # noqa: F401
    except ImportError:
        return False
    return True


@dataclass(frozen=True)
class Target:
    accelerator: str  # a key of ACCELERATORS
    system_config: str  # a [System_Config.*] section of the config file
    memory_mode: str  # a [Memory_Mode.*] section
    config_file: Path = SYSTEMS_INI

    @property
    def arch(self) -> str:
        return ACCELERATORS[self.accelerator][0]

    @property
    def macs(self) -> int:
        return ACCELERATORS[self.accelerator][1]

    def core_clock(self) -> float:
        """The NPU clock (Hz) of the system config, for cycles -> seconds."""
        import configparser

        cp = configparser.ConfigParser()
        cp.read(self.config_file)
        return float(cp[f"System_Config.{self.system_config}"]["core_clock"])


@dataclass
class IoTensor:
    region: int
    offset: int  # bytes into the region
    nbytes: int
    element_bytes: int
    shape: list[int]


@dataclass
class Compiled:
    command_stream: bytes
    read_only: bytes  # weights, biases and scales as Vela encoded them
    read_only_region: int
    scratch_bytes: int
    scratch_region: int
    fast_scratch_bytes: int
    fast_scratch_region: int
    inputs: list[IoTensor]
    outputs: list[IoTensor]
    estimates: dict[str, Any] = field(default_factory=dict)


def system_config_text(target: Target) -> str:
    """What Regor takes as its system configuration: the architecture, the
    chosen sections' names, then the config file itself."""
    if target.accelerator not in ACCELERATORS:
        raise VelaError(f"unknown accelerator {target.accelerator!r}; Vela knows {', '.join(ACCELERATORS)}")
    text = target.config_file.read_text()
    for kind, name in (("System_Config", target.system_config), ("Memory_Mode", target.memory_mode)):
        if f"[{kind}.{name}]" not in text:
            raise VelaError(f"{target.config_file} has no [{kind}.{name}] section")
    return (f"[architecture]\nmacs={target.macs}\ncores=1\n[vela]\nsystem_config_name={target.system_config}\n"
            f"memory_mode_name={target.memory_mode}\n{text}")


def _options(separate_io: bool) -> str:
    lines = ["[compiler]", "output_format=Raw", "", "[scheduler]", "optimize=Performance"]
    if separate_io:
        lines.append("separate_io_regions=true")
    return "\n".join(lines) + "\n"


def _estimates(report: Any, target: Target) -> dict[str, Any]:
    """Vela's performance report as plain numbers: cycles (NPU, and in total
    with the memory stalls Vela models), MACs, MAC utilisation (MACs over
    NPU cycles x MACs per cycle), and per memory its peak use and the bytes
    read and written per kind of data."""
    clock = target.core_clock()
    memories = {}
    for name, mem in report.memories.items():
        if str(name).lower() in ("shram", "lutram"):  # the NPU's internal buffers
            continue
        traffic = {str(kind).lower(): {"read_bytes": int(a.bytesRead), "written_bytes": int(a.bytesWritten)}
                   for kind, a in mem.accesses.items()}
        memories[str(name)] = {"peak_bytes": int(mem.peakUsage), "access_cycles": int(mem.totalAccessCycles),
                               "traffic": traffic,
                               "read_bytes": sum(t["read_bytes"] for t in traffic.values()),
                               "written_bytes": sum(t["written_bytes"] for t in traffic.values())}
    npu_cycles, total = int(report.npuCycles), int(report.totalCycles)
    return {
        "accelerator": target.accelerator, "system_config": target.system_config, "memory_mode": target.memory_mode,
        "npu_clock_hz": clock, "npu_cycles": npu_cycles, "total_cycles": total,
        "inference_seconds": total / clock if clock else None,
        "macs": int(report.macCount),
        "mac_utilisation": round(int(report.macCount) / (npu_cycles * target.macs), 4) if npu_cycles else 0.0,
        "npu_ops": int(report.npuOps), "cpu_ops": int(report.cpuOps),
        "weights_bytes": int(report.originalWeights), "encoded_weights_bytes": int(report.encodedWeights),
        "memories": memories,
    }


def _io(t: Any) -> IoTensor:
    return IoTensor(int(t.region), int(t.address), int(t.size), int(t.element_size), [int(d) for d in t.shape])


def compile_tosa(graph: bytes, target: Target, separate_io: bool = True) -> Compiled:
    """Compile one TOSA flatbuffer; VelaError carries Vela's reason."""
    try:
        from ethosu import regor
    except ImportError as e:  # pragma: no cover - depends on the machine
        raise VelaError(f"Vela is not installed (pip install ethos-u-vela): {e}") from None
    try:
        model = regor.compile(target.arch, graph, "TOSA", system_config_text(target), options=_options(separate_io),
                              verbose=False)
    except RuntimeError as e:
        raise VelaError(" ".join(str(e).split())) from None
    if not isinstance(model, regor.CompiledRawModel):  # pragma: no cover - asked for Raw
        raise VelaError(f"Vela returned {type(model).__name__}, not a raw command stream")
    return Compiled(
        command_stream=bytes(model.command_stream), read_only=bytes(model.read_only.data),
        read_only_region=int(model.read_only.region), scratch_bytes=int(model.scratch.size),
        scratch_region=int(model.scratch.region), fast_scratch_bytes=int(model.scratch_fast.size),
        fast_scratch_region=int(model.scratch_fast.region),
        inputs=[_io(t) for t in model.inputs], outputs=[_io(t) for t in model.outputs],
        estimates=_estimates(model.perf_report, target))
