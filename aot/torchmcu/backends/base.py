"""The interface every backend implements, in two halves: what it does
to a compile (CompileBackend) and to a firmware build (BuildBackend).

The compile driver (torchmcu.compiler) asks each backend's compile half
that the board and the command line name, in order:

    scratch_bytes(code, x, w, y, params)   planned RAM its kernels may ask for (while laying out)
    partition(pg, ctx) -> its partitioning  which ops it takes, grouped (None: none)
    lower(pg, partitioning, ctx)            rewrites pg: marks ops, adds scratch, or replaces a
                                            group by one delegate call
    report(partitioning, ctx) -> dict       its section of report.json (format_report: as text)
    operand_memories(board)                 memories its delegate calls' operands may live in
    check_plan(pg, plan)                    what planning must have given it

`supports(pg, i)` says for one op whether the backend can run it (None) or
why not; partition uses it. The builder (torchmcu.builder) then asks the
build halves for their part of the firmware: `build_parts` for a kernel set
(`torchmcu build --kernels NAME`) or a delegate whose op code the program
has, or the whole firmware (`build_firmware`) for a core whose toolchain the
backend owns (the HiFi DSP's), and `describe_image` says what that built.

Adding a backend is one folder under backends/ with a module backend.py that
defines BACKEND = Backend(its compile half, its build half), and the board
files that name it ([backends] list); no other backend and no driver code
changes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..boards import Board
from ..ir import PGraph


@dataclass
class CompileContext:
    """What a backend may need besides the graph: the board, and the inputs
    to check its numerics on."""

    board: Board
    example_inputs: tuple[Any, ...] = ()
    calibration: Any = None
    state: dict[str, Any] = field(default_factory=dict)  # a backend's results between its steps, by name
    stacklevel: int = 3  # a warning from a hook at this level names the caller of compile()


@dataclass
class BuildParts:
    """A backend's part of one firmware build (torchmcu.builder.firmware)."""

    describe: str  # one line for the Makefile's header and the build log
    cxx_flags: list[str] = field(default_factory=list)  # added to every C++ source's flags
    sources: list[Path] = field(default_factory=list)  # the project's sources, built with the runtime's flags
    # Third-party C sources (a vendor driver), built with their own flags into obj/third_party/<name>/.
    foreign_name: str = ""
    foreign_sources: list[Path] = field(default_factory=list)
    foreign_cflags: list[str] = field(default_factory=list)
    # Archives linked, each made by its own Makefile beside it (a library built once per board, cached).
    libraries: list[Path] = field(default_factory=list)
    kernel_table: Path | None = None  # a kernel set's table, linked instead of the model's own


class CompileBackend:
    """The compile half. Defaults: a backend that takes nothing and adds nothing."""

    name: str = ""  # as boards' `backends` lists and --backends name it
    priority: int = 50  # lower first: delegates take their ops before kernel libraries
    delegate_code: str | None = None  # the program op code of its delegate calls
    report_key: str | None = None  # its report.json section

    def applies(self, board: Board) -> bool:
        """Whether it can run anything on this board (named by default when it does)."""
        return False

    def supports(self, pg: PGraph, index: int) -> str | None:
        return "not supported by this backend"

    def op_codes(self) -> set[str]:
        """The program op codes it can run at all (supports() decides per instance)."""
        return set()

    def scratch_bytes(self, code: str, x: tuple[int, ...], w: tuple[int, ...] | None, y: tuple[int, ...],
                      params: dict[str, Any]) -> int:
        return 0

    def partition(self, pg: PGraph, ctx: CompileContext) -> Any:
        return None

    def lower(self, pg: PGraph, partitioning: Any, ctx: CompileContext) -> None:
        return None

    def report(self, partitioning: Any, ctx: CompileContext) -> dict[str, Any] | None:
        return None

    def format_report(self, section: dict[str, Any]) -> str:
        return ""

    def operand_memories(self, board: Board) -> tuple[str, ...] | None:
        """The memories its delegate calls' operands must live in (None: any)."""
        return None

    def check_plan(self, pg: PGraph, plan: Any) -> None:
        return None


class BuildBackend:
    """The build half. Defaults: a backend that adds nothing to a firmware build."""

    name: str = ""
    # The firmware folder of its kernels (kernels.h declares them), when it is a kernel set that
    # `torchmcu build --kernels <kernel_set>` selects; the table uses its C++ namespace (the folder's name).
    kernel_set: str | None = None
    kernel_dir: str | None = None
    delegate_code: str | None = None  # the program op code whose kernel is its delegate (in kernel_dir)

    def build_parts(self, board: Board, out: Path, codes: list[str]) -> BuildParts:
        raise NotImplementedError(f"backend {self.name} adds nothing to a firmware build")

    def builds_firmware(self, board: Board) -> bool:
        """Whether this backend builds the whole firmware for the board (its toolchain, not arm-none-eabi)."""
        return False

    def build_firmware(self, out: Path, board: Board, opt: str) -> Path:
        raise NotImplementedError(f"backend {self.name} does not build firmware")

    def describe_image(self, image: Path) -> str:
        """One line on the image build_firmware made (`torchmcu build` prints it)."""
        return f"{image}: built by backend {self.name}"


@dataclass(frozen=True)
class Backend:
    """A backend: its two halves, under one name."""

    compile: CompileBackend
    build: BuildBackend

    def __post_init__(self) -> None:
        if (self.compile.name, self.compile.delegate_code) != (self.build.name, self.build.delegate_code):
            raise ValueError(f"backend {self.compile.name}: its halves disagree on its name or delegate op code")

    @property
    def name(self) -> str:
        return self.compile.name
