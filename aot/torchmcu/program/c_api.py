"""The C API of one compiled model: NAME.h (plain C99) and NAME.cc.

`torchmcu compile --symbol NAME` writes them beside model_pte.c and
model_arenas.c. The header is what an application includes:

    int   tmcu_NAME_init(void);      load the program into its planned memory
    void *tmcu_NAME_input(int i);    where to write input i (in the arena)
    int   tmcu_NAME_invoke(void);    run every op once
    void *tmcu_NAME_output(int i);   where output i is (in the arena)
    int   tmcu_NAME_reset(void);     back to the state right after init
    const char *tmcu_error_name(int err);   (torchmcu/torchmcu.h)

and, per input and output k, macros with its bytes, rank, dims, layout,
dtype, C element type, scale and zero point: everything the application needs
to fill and read the buffers without opening the program.

The source is C++ (the runtime beneath is), with every function extern "C";
its one object, the runtime's Method, is the model's only RAM besides the
arenas. tmcu_NAME_init checks that the program it loads is the one the
header describes (the number, bytes and dtype of every input and output), so
a header from another compile cannot silently misdescribe it.

The stack those calls need is known only once an image is linked: `torchmcu
build` writes NAME_stack.h (stack_header) with TMCU_NAME_STACK_BYTES, the
build's computed figure for the model's calls (builder.stack: model_bytes).
`compile` alone writes none, so a program that includes it before a build
fails to compile rather than using a guess.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .serialize import check_symbol

# Symbols whose generated names would collide with the runtime's own C API
# (tmcu_platform_init, tmcu_app_run, tmcu_error_name, tmcu_delegate_...).
RESERVED_SYMBOLS = frozenset({"platform", "app", "error", "delegate", "arduino", "method", "program"})

# PyTorch's dims by rank, as letters: the layout string is their physical order.
LOGICAL_LETTERS = {1: "C", 2: "NC", 3: "NCL", 4: "NCHW", 5: "NCDHW"}
C_TYPES = {"float32": "float", "int8": "int8_t", "int16": "int16_t", "int32": "int32_t"}
DTYPE_MACROS = {"float32": "TMCU_DTYPE_FLOAT32", "int8": "TMCU_DTYPE_INT8", "int16": "TMCU_DTYPE_INT16",
                "int32": "TMCU_DTYPE_INT32"}


@dataclass(frozen=True)
class IoTensor:
    """A model input or output as the program holds it."""
    name: str
    shape: tuple[int, ...]  # PyTorch's (logical) shape
    perm: tuple[int, ...]  # physical dim j holds logical dim perm[j]
    dtype: str  # "float32" | "int8" | "int16"
    scale: float = 0.0  # integer tensors: real = scale * (q - zero_point)
    zero_point: int = 0

    @property
    def dims(self) -> tuple[int, ...]:
        return tuple(self.shape[p] for p in self.perm) if self.shape else (1,)

    @property
    def nbytes(self) -> int:
        n = {"float32": 4, "int8": 1, "int16": 2, "int32": 4}[self.dtype]
        for d in self.dims:
            n *= d
        return n

    @property
    def layout(self) -> str:
        """The physical order as letters of PyTorch's dims ("NHWC"), or the
        permutation ("0,2,1,...") for ranks without names."""
        letters = LOGICAL_LETTERS.get(len(self.shape))
        if letters is None:
            return ",".join(str(p) for p in self.perm)
        return "".join(letters[p] for p in self.perm)

    def as_meta(self) -> dict[str, Any]:
        return {"name": self.name, "shape": list(self.shape), "dims": list(self.dims), "perm": list(self.perm),
                "layout": self.layout, "dtype": self.dtype, "bytes": self.nbytes,
                **({"scale": self.scale, "zero_point": self.zero_point} if self.dtype != "float32" else {})}


def check_api_symbol(symbol: str) -> str:
    check_symbol(symbol)
    if symbol.lower() in RESERVED_SYMBOLS:
        raise ValueError(f"model symbol {symbol!r} would collide with the runtime's own tmcu_{symbol}_* "
                         f"functions; choose another --symbol (not {', '.join(sorted(RESERVED_SYMBOLS))})")
    return symbol


def _describe(kind: str, k: int, t: IoTensor) -> str:
    quant = (f", real = {t.scale!r} * (q - {t.zero_point})" if t.dtype in ("int8", "int16") else
             ", integer values (PyTorch's int64 or bool input given as int32; bool: 0 or 1)" if t.dtype == "int32"
             else "")
    torch_order = "" if list(t.perm) == sorted(t.perm) else f" (PyTorch's {list(t.shape)}, dims permuted {list(t.perm)})"
    return f"/* {kind} {k} \"{t.name}\": {t.dtype} {t.layout} {list(t.dims)}{torch_order}{quant}. */\n"


def _tensor_macros(prefix: str, t: IoTensor) -> str:
    dims = ", ".join(str(d) for d in t.dims)
    lines = [
        f"#define {prefix}_BYTES {t.nbytes}",
        f"#define {prefix}_RANK {len(t.dims)}",
        f"#define {prefix}_DIMS {{{dims}}}",
        *(f"#define {prefix}_DIM{j} {d}" for j, d in enumerate(t.dims)),
        f"#define {prefix}_LAYOUT \"{t.layout}\"",
        f"#define {prefix}_PERM {{{', '.join(str(p) for p in t.perm)}}}",
        f"#define {prefix}_DTYPE {DTYPE_MACROS[t.dtype]}",
        f"#define {prefix}_TYPE {C_TYPES[t.dtype]}",
        f"#define {prefix}_ELEMENTS {t.nbytes // {'float32': 4, 'int8': 1, 'int16': 2, 'int32': 4}[t.dtype]}",
        f"#define {prefix}_SCALE {float(t.scale)!r}f",
        f"#define {prefix}_ZERO_POINT {int(t.zero_point)}",
    ]
    return "\n".join(lines) + "\n"


def api_sources(symbol: str, inputs: list[IoTensor], outputs: list[IoTensor], about: dict[str, Any]) -> tuple[
        str, str]:
    """(NAME.h, NAME.cc). `about`: board, quant, io_layout, arena_bytes,
    program_bytes (for the header's comment and its information macros)."""
    sym = check_api_symbol(symbol)
    up = sym.upper()
    guard = f"TORCHMCU_MODEL_{up}_H_"
    io = about.get("io_layout", "nchw")
    head = [
        f"/* {sym}.h: the C API of the model `torchmcu compile --symbol {sym}` compiled, for board "
        f"{about.get('board')} ({about.get('quant')}).",
        "   Generated; plain C99. Link it with its source (" + sym + ".cc), model_pte.c, model_arenas.c,",
        "   kernel_table.cc and the torchmcu runtime (`torchmcu build DIR --lib` packs them).",
        "",
        f"   int   tmcu_{sym}_init(void);     0, or a TMCU_ERROR_* code: load the program, bind its arenas",
        f"   void *tmcu_{sym}_input(int i);   input i's buffer (NULL before init or out of range)",
        f"   int   tmcu_{sym}_invoke(void);   run the model once over the inputs",
        f"   void *tmcu_{sym}_output(int i);  output i's buffer, valid until the next invoke",
        f"   int   tmcu_{sym}_reset(void);    back to the state after init (stateful models)",
        "",
        "   Inputs and outputs live in the planned arenas, and an invoke overwrites its inputs: once",
        "   an input's last reader has run, the plan gives its bytes to later activations (no kernel",
        "   writes in place over an input, but the arena reuses it). Write every input before each",
        "   invoke, and read the outputs before the next one.",
        f"   The stack these calls need: TMCU_{up}_STACK_BYTES in {sym}_stack.h, which `torchmcu build`",
        "   writes from the linked image's computed worst case (compile alone writes none).",
        f"   I/O chosen at compile: {'--io-layout ' + io}; dtypes as below. */",
    ]
    parts = ["\n".join(head), "\n", f"#ifndef {guard}\n#define {guard}\n\n",
             "#include <stddef.h>\n#include <stdint.h>\n\n#include \"torchmcu/torchmcu.h\"\n\n",
             "#ifdef __cplusplus\nextern \"C\" {\n#endif\n\n",
             f"#define TMCU_{up}_NUM_INPUTS {len(inputs)}\n",
             f"#define TMCU_{up}_NUM_OUTPUTS {len(outputs)}\n",
             f"/* RAM the plan gives the activations (all arenas) and flash the program takes. */\n"
             f"#define TMCU_{up}_ARENA_BYTES {int(about.get('arena_bytes', 0))}\n"
             f"#define TMCU_{up}_PROGRAM_BYTES {int(about.get('program_bytes', 0))}\n\n"]
    for kind, tensors in (("input", inputs), ("output", outputs)):
        for k, t in enumerate(tensors):
            parts.append(_describe(kind, k, t))
            parts.append(_tensor_macros(f"TMCU_{up}_{kind.upper()}{k}", t) + "\n")
    parts += [f"int tmcu_{sym}_init(void);\n", f"void* tmcu_{sym}_input(int i);\n",
              f"void* tmcu_{sym}_output(int i);\n", f"int tmcu_{sym}_invoke(void);\n",
              f"int tmcu_{sym}_reset(void);\n\n", "#ifdef __cplusplus\n}\n#endif\n\n", f"#endif /* {guard} */\n"]
    header = "".join(parts)

    def specs(kind: str, tensors: list[IoTensor]) -> str:
        rows = ", ".join(f"{{TMCU_{up}_{kind}{k}_BYTES, TMCU_{up}_{kind}{k}_DTYPE}}" for k in range(len(tensors)))
        return f"constexpr IoSpec k{kind.title()}s[] = {{{rows or '{0, 0}'}}};\n"

    num_arenas = f"TMCU_{up}_NUM_ARENAS"
    source = (
        f"// Generated by torchmcu compile: the C API of model {sym} (declared in {sym}.h).\n"
        f"#include \"{sym}.h\"\n\n"
        "#include \"core/method.h\"\n#include \"core/program.h\"\n"
        "#include \"model_arenas.h\"\n#include \"model_pte.h\"\n\n"
        "namespace {\n\n"
        "// The runtime's state of the loaded model: its only RAM besides the arenas\n"
        "// (constant-initialised: no static constructor).\n"
        "torchmcu::Method g_method;\n"
        "bool g_ready = false;\n\n"
        "struct IoSpec {\n  uint32_t bytes;\n  uint32_t dtype;\n};\n"
        + specs("INPUT", inputs) + specs("OUTPUT", outputs) +
        "\n// The program is the one the header describes: every input and output has\n"
        "// the header's bytes and dtype.\n"
        "bool described(const torchmcu::TensorView& t, const IoSpec& s) {\n"
        "  return t.present() && t.nbytes == s.bytes && uint32_t(t.dtype) == s.dtype;\n}\n\n"
        "}  // namespace\n\n"
        f"extern \"C\" int tmcu_{sym}_init(void) {{\n"
        "  g_ready = false;\n"
        f"  const torchmcu::Result<torchmcu::Program> program = torchmcu::Program::load(tmcu_{sym}_pte, "
        f"tmcu_{sym}_pte_size);\n"
        "  if (!program.ok()) return int(program.error());\n"
        "  const torchmcu::Result<torchmcu::Method> method = torchmcu::Method::load(\n"
        f"      program.get(), reinterpret_cast<const torchmcu::ArenaSpan*>(tmcu_{sym}_arenas), {num_arenas});\n"
        "  if (!method.ok()) return int(method.error());\n"
        "  g_method = method.get();\n"
        f"  if (g_method.num_inputs() != TMCU_{up}_NUM_INPUTS || g_method.num_outputs() != TMCU_{up}_NUM_OUTPUTS) {{\n"
        "    return int(torchmcu::Error::InvalidProgram);\n  }\n"
        f"  for (uint32_t i = 0; i < TMCU_{up}_NUM_INPUTS; ++i) {{\n"
        "    if (!described(g_method.input(i), kInputs[i])) return int(torchmcu::Error::InvalidProgram);\n  }\n"
        f"  for (uint32_t i = 0; i < TMCU_{up}_NUM_OUTPUTS; ++i) {{\n"
        "    if (!described(g_method.output(i), kOutputs[i])) return int(torchmcu::Error::InvalidProgram);\n  }\n"
        "  g_ready = true;\n  return 0;\n}\n\n"
        f"extern \"C\" void* tmcu_{sym}_input(int i) {{\n"
        f"  if (!g_ready || i < 0 || i >= TMCU_{up}_NUM_INPUTS) return nullptr;\n"
        "  return g_method.input(uint32_t(i)).data;\n}\n\n"
        f"extern \"C\" void* tmcu_{sym}_output(int i) {{\n"
        f"  if (!g_ready || i < 0 || i >= TMCU_{up}_NUM_OUTPUTS) return nullptr;\n"
        "  return g_method.output(uint32_t(i)).data;\n}\n\n"
        f"extern \"C\" int tmcu_{sym}_invoke(void) {{\n"
        "  if (!g_ready) return int(torchmcu::Error::InvalidArgument);  // init first (or it failed)\n"
        "  return int(g_method.execute());\n}\n\n"
        "// Loading again puts every persistent buffer (a recurrent model's state)\n"
        "// back to its initial value; the program is read in place, nothing is copied\n"
        "// but the init copies.\n"
        f"extern \"C\" int tmcu_{sym}_reset(void) {{\n"
        f"  return tmcu_{sym}_init();\n}}\n"
    )
    return header, source


def stack_header_name(symbol: str) -> str:
    return f"{symbol}_stack.h"


def stack_header(symbol: str, stack: dict[str, Any], board: str, kernels: str, opt: str) -> str:
    """NAME_stack.h, written by `torchmcu build`: the stack the model's C API
    calls need, from the linked image's analysis (size.json "stack"). When it
    could not be bounded the header says why and defines no figure, so a
    program that sizes a stack from it does not compile."""
    sym = check_api_symbol(symbol)
    up = sym.upper()
    guard = f"TORCHMCU_MODEL_{up}_STACK_H_"
    model = stack.get("model_bytes")
    head = [
        f"/* {stack_header_name(sym)}: the stack the calls of {sym}.h need. Generated by `torchmcu build` for board",
        f"   {board} (kernels {kernels}, {opt}) from the linked image's computed worst case (size.json \"stack\").",
        "",
        f"   TMCU_{up}_STACK_BYTES: the deepest path under tmcu_{sym}_init, _invoke and _reset",
        "   (GCC's -fstack-usage frames over the linked call graph) plus the deepest exception frame",
        "   stacked on top. Size the stack of the thread that calls the model as this plus the",
        "   application's own need (its frames above these calls, e.g. main's and printf's, and",
        "   interrupts of its own at other priorities). Rebuild after a new compile or other kernels:",
        "   the figure is this build's. */",
    ]
    lines = ["\n".join(head), "", f"#ifndef {guard}", f"#define {guard}", ""]
    if model is not None:
        lines += [f"/* {stack.get('model_main_bytes', 0):,} B the calls' deepest path + "
                  f"{stack.get('handler_bytes', 0):,} B the deepest exception; from {stack.get('model_from', '')}. */",
                  f"#define TMCU_{up}_STACK_BYTES {int(model)}"]
        computed = stack.get("computed_bytes")
        if computed is not None:
            lines += [f"/* The whole firmware `torchmcu build` linked (its startup, main and app included). */",
                      f"#define TMCU_{up}_FIRMWARE_STACK_BYTES {int(computed)}"]
    else:
        why = str(stack.get("model_from") or "; ".join(stack.get("unbounded", [])) or "not analysed")
        lines += [f"/* No figure: the stack could not be bounded ({why.replace('*/', '* /')}). */",
                  f"#define TMCU_{up}_STACK_UNBOUNDED 1"]
    lines += ["", f"#endif /* {guard} */", ""]
    return "\n".join(lines)
