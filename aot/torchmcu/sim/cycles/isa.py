"""Thumb instructions as QEMU's in_asm log prints them (capstone's syntax),
sorted into the classes the cores' timing tables (cores/*.toml) price.

Each executed instruction's class comes from its mnemonic and operands
alone: the log carries no operand values (a divide's operands, a load's
address), so whatever depends on them is the table's stated assumption.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from functools import lru_cache

CONDS = ("eq", "ne", "cs", "hs", "cc", "lo", "mi", "pl", "vs", "vc", "hi", "ls", "ge", "lt", "gt", "le", "al")

# Base mnemonic -> class. Longest base first when matching, so "ldrb" wins over "ldr".
_SCALAR = {
    **dict.fromkeys("mov mvn add adc sub sbc rsb rsc and orr orn eor bic cmp cmn tst teq lsl lsr asr ror rrx "
                    "adr movw movt sxtb sxth uxtb uxth sxtab sxtah uxtab uxtah sxtb16 uxtb16 sxtab16 uxtab16 "
                    "bfi bfc ubfx sbfx clz rbit rev rev16 revsh ssat usat ssat16 usat16 sel pkhbt pkhtb "
                    "qadd qsub qdadd qdsub qadd8 qadd16 qsub8 qsub16 qasx qsax uqadd8 uqadd16 uqsub8 uqsub16 "
                    "uqasx uqsax sadd8 sadd16 ssub8 ssub16 sasx ssax uadd8 uadd16 usub8 usub16 uasx usax "
                    "shadd8 shadd16 shsub8 shsub16 shasx shsax uhadd8 uhadd16 uhsub8 uhsub16 uhasx uhsax "
                    "usad8 usada8 neg cpy addw subw".split(), "alu"),
    **dict.fromkeys("mul smulbb smulbt smultb smultt smulwb smulwt smmul smmulr smuad smuadx smusd smusdx"
                    .split(), "mul"),
    **dict.fromkeys("mla mls smlabb smlabt smlatb smlatt smlawb smlawt smmla smmlar smmls smmlsr smlad smladx "
                    "smlsd smlsdx".split(), "mac"),
    **dict.fromkeys("smull umull".split(), "mull"),
    **dict.fromkeys("smlal umlal umaal smlalbb smlalbt smlaltb smlaltt smlald smlaldx smlsld smlsldx".split(), "mlal"),
    **dict.fromkeys("sdiv udiv".split(), "div"),
    **dict.fromkeys("ldr ldrb ldrh ldrsb ldrsh ldrex ldrexb ldrexh ldrt ldrbt ldrht ldrsbt ldrsht lda ldab ldah "
                    "ldaex".split(), "load"),
    **dict.fromkeys("str strb strh strex strexb strexh strt strbt strht stl stlb stlh stlex".split(), "store"),
    "ldrd": "load_dual", "strd": "store_dual",
    **dict.fromkeys("ldm ldmia ldmfd ldmdb ldmea pop".split(), "ldm"),
    **dict.fromkeys("stm stmia stmea stmdb stmfd push".split(), "stm"),
    **dict.fromkeys("b bl bx blx bxns blxns".split(), "branch"),
    **dict.fromkeys("cbz cbnz".split(), "cbz"),
    **dict.fromkeys("tbb tbh".split(), "table_branch"),
    "nop": "nop", "yield": "nop",
    **dict.fromkeys("mrs msr cpsie cpsid dmb dsb isb wfi wfe sev svc bkpt udf clrex pld pli sg tt ttt tta ttat "
                    "csdb ssbb pssbb".split(), "system"),
    # Armv8.1-M low-overhead loops (the M55's): while/do loop starts, loop ends.
    **dict.fromkeys("dls wls dlstp.8 dlstp.16 dlstp.32 dlstp.64 wlstp.8 wlstp.16 wlstp.32 wlstp.64".split(), "loop_start"),
    **dict.fromkeys("le letp lctp".split(), "loop_end"),
    **dict.fromkeys("csel csinc csinv csneg cset csetm cinc cinv cneg".split(), "alu"),
    **dict.fromkeys("asrl lsll lsrl sqrshr sqrshrl sqshl sqshll srshr srshrl uqrshl uqrshll uqshl uqshll urshr "
                    "urshrl".split(), "mve_scalar_shift"),
}

# Floating point (FPv4/FPv5 on S/D registers).
_FP = {
    **dict.fromkeys("vadd vsub vmul vnmul vneg vabs vcmp vcmpe vcvt vcvtr vcvta vcvtn vcvtp vcvtm vcvtb vcvtt "
                    "vmov vsel vmaxnm vminnm vrinta vrintn vrintp vrintm vrintr vrintx vrintz vins vmovx".split(),
                    "fp_alu"),
    **dict.fromkeys("vmla vmls vnmla vnmls vfma vfms vfnma vfnms".split(), "fp_mac"),
    **dict.fromkeys("vdiv vsqrt".split(), "fp_div"),
    "vldr": "fp_load", "vstr": "fp_store",
    **dict.fromkeys("vldm vldmia vldmdb vpop vstm vstmia vstmdb vpush vlstm vlldm vscclrm".split(), "fp_ldm"),
    **dict.fromkeys("vmrs vmsr".split(), "fp_system"),
}
_FP_KEYS = sorted(_FP, key=len, reverse=True)

# MVE (Helium) on Q registers: the pipe a beat goes down (the M55's four: load/store, integer, mul, float).
_MVE_LOAD = re.compile(r"^(vldr[bhwd]|vld[24][0-3])")
_MVE_STORE = re.compile(r"^(vstr[bhwd]|vst[24][0-3])")
_MVE_REDUCE = re.compile(r"^(vaddv|vaddlv|vabav|vml[as]l?d?a?v|vrml[as]l?d?a?vh|"  # VMLADAV(A), its alias VMLAV(A), ...
                         r"vmaxv|vminv|vmaxav|vminav|vmaxnmv|vminnmv|vmaxnmav|vminnmav)")
_MVE_MUL = re.compile(r"^(vmul|vmla|vmlas|vqdmul|vqrdmul|vqdmla|vqrdmla|vqdmls|vqrdmls|vfma|vfms|vfmas|vmull|vcmul|"
                      r"vcmla|vqdmull|vbrsr|vmulh|vrmulh)")
_MVE_PRED = re.compile(r"^(vpst|vpt|vpte|vptt|vpnot|vctp)")
_QREG = re.compile(r"\bq[0-7]\b")
_REG = re.compile(r"\b(r1[0-5]|r[0-9]|sb|sl|fp|ip|sp|lr|pc)\b")
_ALIASES = {"sb": "r9", "sl": "r10", "fp": "r11", "ip": "r12", "r13": "sp", "r14": "lr", "r15": "pc"}


@dataclass(frozen=True)
class Insn:
    """One instruction of a translation block as the timing model sees it."""
    address: int
    size: int  # bytes: 2 or 4
    cls: str  # the timing table's class
    mnemonic: str  # the base mnemonic (no condition, no .w, no data type)
    conditional: bool  # a conditional branch: taken or not is found from the next block's address
    writes: frozenset[str]  # core registers written
    reads: frozenset[str]  # core registers read
    address_regs: frozenset[str]  # a load/store's base and index registers
    regs: int = 0  # LDM/STM/PUSH/POP/VLDM: registers in the list
    pipe: str = ""  # MVE: the pipe its beats go down
    target: int | None = None  # a direct branch's target


def _regs(text: str) -> list[str]:
    return [_ALIASES.get(r, r) for r in _REG.findall(text)]


def _split_cond(mn: str, base: str) -> tuple[bool, str] | None:
    """Whether mnemonic `mn` is `base` with an optional s / condition suffix."""
    rest = mn[len(base):]
    if rest in ("", "s"):
        return False, rest
    for c in CONDS:
        if rest in (c, "s" + c):
            return True, rest
    return None


def decode(address: int, size: int, mnemonic: str, operands: str) -> Insn:
    """The class of one instruction from its text: GNU objdump's (the ELF
    disassembled for the core's architecture: it knows MVE and Armv8.1-M,
    which the capstone of Debian's QEMU prints as bytes) or capstone's."""
    insn = _decode_text(size, mnemonic, operands)  # the text alone decides; a run repeats few texts
    return insn if address == 0 else replace(insn, address=address)


_SUFFIXES = ("", "s", *CONDS, *("s" + c for c in CONDS))  # what may follow a base mnemonic


def _scalar_base(core: str) -> tuple[str, bool] | None:
    """The longest base mnemonic of _SCALAR that `core` is, with an optional
    s / condition suffix (and whether it has a condition)."""
    found = [(core[:len(core) - len(rest)], rest not in ("", "s")) for rest in _SUFFIXES if core.endswith(rest)]
    return max((f for f in found if f[0] in _SCALAR), key=lambda f: len(f[0]), default=None)


@lru_cache(maxsize=None)
def _decode_text(size: int, mnemonic: str, operands: str) -> Insn:
    address = 0
    mn = mnemonic.lower()
    ops = operands.lower()
    core = mn.split(".", 1)[0]  # "ldr.w" -> "ldr", "vldrb.s8" -> "vldrb"
    dtype = mn.split(".", 1)[1] if "." in mn else ""
    ops = ops.split("@", 1)[0].strip()  # objdump's comments
    target = None
    m = re.match(r"#(0x[0-9a-f]+|\d+)$", ops)  # capstone: "#0x18"
    if m:
        target = int(m.group(1), 0)
    m = re.match(r"(?:(r\d+|lr),\s*)?([0-9a-f]+)\s*<[^>]*>$", ops)  # objdump: "18 <bench>", "lr, 50 <f+0x18>"
    if m:
        target = int(m.group(2), 16)
        ops = m.group(1) or ""
    if core.startswith("it") and set(core[1:]) <= {"t", "e"}:
        return Insn(address, size, "it", "it", False, frozenset(), frozenset(), frozenset())
    if core.startswith("v") or _QREG.search(ops):
        return _decode_vector(address, size, core, dtype, ops)
    found = _scalar_base(core)
    if found is not None:
        base, cond = found
        cls = _SCALAR[base]
        regs = _regs(ops)
        inside = re.search(r"\[([^\]]*)\]", ops)
        addr = frozenset(_regs(inside.group(1))) if inside else frozenset()
        writeback = "!" in ops or bool(re.search(r"\],\s*#", ops))
        if cls in ("load", "load_dual"):
            dst = _regs(ops[:inside.start()]) if inside else regs[:1]
            n = 2 if cls == "load_dual" else 1
            writes = set(dst[:n]) | (set(regs[-1:]) & addr if writeback else set())
            if "pc" in addr and cls == "load":
                cls = "load_literal"
            if "pc" in dst[:n]:
                cls = "load_pc"
            return Insn(address, size, cls, base, False, frozenset(writes), addr, addr)
        if cls in ("store", "store_dual"):
            return Insn(address, size, cls, base, False, frozenset(addr if writeback else ()), frozenset(regs), addr)
        if cls in ("ldm", "stm"):
            lst = re.search(r"\{([^}]*)\}", ops)
            listed = _expand_list(lst.group(1)) if lst else []
            basereg = [] if base in ("push", "pop") else regs[:1]
            if cls == "ldm" and "pc" in listed:
                cls = "ldm_pc"
            writes = set(listed) if cls.startswith("ldm") else set()
            return Insn(address, size, cls, base, False, frozenset(writes | set(basereg)),
                        frozenset(basereg + (listed if cls == "stm" else [])), frozenset(basereg), regs=len(listed))
        if cls in ("branch", "cbz"):
            return Insn(address, size, cls, base, cond or cls == "cbz", frozenset({"lr"} if base.startswith("bl") else ()),
                        frozenset(regs), frozenset(), target=target)
        if cls == "table_branch":
            return Insn(address, size, cls, base, False, frozenset(), frozenset(regs), addr)
        writes = frozenset(regs[:1]) if cls not in ("alu",) or base not in ("cmp", "cmn", "tst", "teq") else frozenset()
        if cls == "mlal" and len(regs) >= 2:
            writes = frozenset(regs[:2])
        if "pc" in writes and cls == "alu":
            cls = "alu_pc"
        return Insn(address, size, cls, base, False, writes, frozenset(regs[1:] if writes else regs), frozenset())
    return Insn(address, size, "other", core, False, frozenset(), frozenset(_regs(ops)), frozenset())


def _expand_list(text: str) -> list[str]:
    out: list[str] = []
    for part in text.split(","):
        part = part.strip()
        if "-" in part:
            a, b = (p.strip() for p in part.split("-"))
            pre = a.rstrip("0123456789")
            out += [f"{pre}{i}" for i in range(int(a[len(pre):]), int(b[len(pre):]) + 1)]
        elif part:
            out.append(_ALIASES.get(part, part))
    return out


def _decode_vector(address: int, size: int, core: str, dtype: str, ops: str) -> Insn:
    regs = frozenset(_regs(ops))
    q = bool(_QREG.search(ops))
    inside = re.search(r"\[([^\]]*)\]", ops)
    addr = frozenset(_regs(inside.group(1))) if inside else frozenset()
    writeback = "!" in ops or bool(re.search(r"\],\s*#", ops))
    wb = addr if writeback else frozenset()
    if _MVE_LOAD.match(core):
        return Insn(address, size, "mve_load", core, False, wb, regs, addr, pipe="ls")
    if _MVE_STORE.match(core):
        return Insn(address, size, "mve_store", core, False, wb, regs, addr, pipe="ls")
    if _MVE_PRED.match(core):
        return Insn(address, size, "mve_pred", core, False, frozenset(), regs, frozenset(), pipe="")
    if _MVE_REDUCE.match(core):
        gpr = _regs(ops)
        return Insn(address, size, "mve_reduce", core, False, frozenset(gpr[:2] if "l" in core[4:] else gpr[:1]),
                    regs, frozenset(), pipe="mul" if "ml" in core else "int")
    if q:
        fp = dtype.startswith("f")
        if _MVE_MUL.match(core):
            return Insn(address, size, "mve_mul", core, False, frozenset(), regs, frozenset(), pipe="fp" if fp else "mul")
        # VMOV/VDUP between core registers and lanes, and the rest of the integer ALU ops
        return Insn(address, size, "mve_fp" if fp else "mve_int", core, False,
                    frozenset(_regs(ops)[:1]) if core == "vmov" and not ops.startswith("q") else frozenset(),
                    regs, frozenset(), pipe="fp" if fp else "int")
    for base in _FP_KEYS:
        if core == base or (core.startswith(base) and _split_cond(core, base) is not None):
            cls = _FP[base]
            gpr = _regs(ops)
            lst = re.search(r"\{([^}]*)\}", ops)
            n = len(_expand_list(lst.group(1))) if lst else 0
            if base == "vmov":  # two core registers <-> a D register or two S registers: fp_mov2
                cls = "fp_mov2" if len(gpr) == 2 else "fp_alu"
                to_core = bool(gpr) and ops.startswith(("r", "ip", "lr", "sb", "sl", "fp"))
                writes = frozenset(gpr) if to_core else frozenset()
                return Insn(address, size, cls, base, False, writes, frozenset() if to_core else frozenset(gpr),
                            frozenset())
            return Insn(address, size, cls, base, False, wb, frozenset(gpr), addr, regs=n)
    return Insn(address, size, "other", core, False, frozenset(), regs, frozenset())


# objdump -m machines (it has no armv7-m: armv7e-m, a superset, reads M3 code the same)
OBJDUMP_ARCH = {"cortex-m3": "armv7e-m", "cortex-m4": "armv7e-m", "cortex-m7": "armv7e-m",
                "cortex-m33": "armv8-m.main", "cortex-m35p": "armv8-m.main", "cortex-m55": "armv8.1-m.main",
                "cortex-m85": "armv8.1-m.main"}
_OBJDUMP_LINE = re.compile(r"^\s*([0-9a-f]+):\s+((?:[0-9a-f]{4} ?){1,2})\s+(\S+)\s*(.*)$")


def disassemble(elf: str, cpu: str) -> dict[int, tuple[int, str, str]]:
    """Every instruction of `elf`'s code: address -> (bytes, mnemonic, operands), by GNU objdump."""
    import subprocess

    from ...toolchain import CROSS, require

    arch = OBJDUMP_ARCH.get(cpu, "armv8.1-m.main")
    text = subprocess.run([require(CROSS + "objdump"), "-d", "-m", arch, "-w", elf],
                          capture_output=True, text=True, check=True).stdout
    code: dict[int, tuple[int, str, str]] = {}
    for line in text.splitlines():
        m = _OBJDUMP_LINE.match(line)
        if m and not m.group(3).startswith("."):
            code[int(m.group(1), 16)] = (2 * len(m.group(2).split()), m.group(3), m.group(4))
    return code
