"""Fuzzing the runtime (firmware/host/fuzz_program.cc) with libFuzzer.

The fuzzer, built with clang's -fsanitize=fuzzer,address,undefined over the
runtime and every portable kernel, mutates a few compiled programs (float and
int8) for TORCHMCU_FUZZ_SECONDS (default 60) and must find nothing: no
crash, sanitizer finding, leak or hang. Every seed must run cleanly, all the
way to execute(). And to show the harness can find bugs at all, a build with
the verifier switched off (the runtime's TORCHMCU_VERIFY=0, for trusted
programs only) must crash within seconds on the same seeds.

Skipped when clang++ or its libFuzzer runtime is missing (Debian:
`apt-get install clang libclang-rt-14-dev`, or `make setup`).
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import pytest
from torchmcu import fuzz

SECONDS = int(os.environ.get("TORCHMCU_FUZZ_SECONDS", "60"))
# Well under what any machine does (about 40,000/s on two cores): a harness
# that became slow, or stopped executing at all, fails here.
MIN_EXEC_PER_SECOND = 500
BROKEN_SECONDS = 20  # the unverified build crashes in well under a second

_problem = fuzz.toolchain_problem()
needs_fuzzer = pytest.mark.skipif(_problem is not None, reason=f"no libFuzzer toolchain: {_problem}")


@pytest.fixture(scope="module")
def fuzzer() -> Path:
    return fuzz.build_fuzzer()


@pytest.fixture(scope="module")
def seeds(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    return fuzz.make_corpus(tmp_path_factory.mktemp("seeds"))


def _corpus(seeds: list[Path], where: Path) -> Path:
    corpus = where / "corpus"
    corpus.mkdir()
    for s in seeds:
        shutil.copy(s, corpus / s.name)
    return corpus


def _describe(res: dict, exe: Path) -> str:
    lines = [f"{c['kind']}: {c['summary'] or c['error']}\n  reproduce: {exe} {c['path']}" for c in res["crashes"]]
    return "\n".join(lines) + f"\n  log: {res['log']}"


@needs_fuzzer
def test_seeds_run_to_completion(seeds: list[Path]) -> None:
    """Every seed loads, and executes (not skipped by the harness's caps), cleanly."""
    assert len(seeds) >= 6
    verbose = fuzz.build_fuzzer(defines=("TMCU_FUZZ_VERBOSE=1",))
    proc = fuzz.replay(seeds, verbose)
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert "runtime error" not in proc.stderr and "ERROR:" not in proc.stderr, proc.stderr[-4000:]
    # Each seed ran (libFuzzer's own line per file) and every run the harness traced executed with status 0:
    # none refused at load, none skipped by the caps. (libFuzzer may call the target more often than once
    # per file, e.g. on an empty input first: count the files, not the calls.)
    assert sum(f"Executed {s} in" in proc.stderr for s in seeds) == len(seeds), proc.stderr[-4000:]
    traces = re.findall(r"^fuzz_program: (.*)$", proc.stderr, re.MULTILINE)
    assert len(traces) >= len(seeds) and set(traces) == {"executed 0x00"}, proc.stderr[-4000:]


@needs_fuzzer
def test_fuzzing_finds_nothing(fuzzer: Path, seeds: list[Path], tmp_path: Path) -> None:
    res = fuzz.run_fuzzer(SECONDS, _corpus(seeds, tmp_path), tmp_path / "artifacts", fuzzer=fuzzer)
    print(f"fuzz: {res['executions']:,} executions in {res['seconds']} s ({res['exec_per_sec']}/s), "
          f"coverage {res['coverage']}/{res['counters']} edges, {res['features']} features, "
          f"+{res['new_units']} units")
    assert not res["crashes"], _describe(res, fuzzer)
    assert res["returncode"] == 0
    assert res["executions"] >= MIN_EXEC_PER_SECOND * SECONDS, res
    assert not any((tmp_path / "artifacts").glob("crash-*"))
    # Mutation reaches past the seeds: new coverage was found.
    assert res["new_units"] > 0 and res["coverage"] > 0


@needs_fuzzer
def test_fuzzer_finds_a_planted_bug(seeds: list[Path], tmp_path: Path) -> None:
    """Without the verifier, a mutated offset is read unchecked: a sanitizer
    (AddressSanitizer for the out-of-bounds read, or UBSan for the misaligned
    one that often comes first) must report it, and quickly."""
    broken = fuzz.build_fuzzer(defines=fuzz.UNVERIFIED)
    # A wild read is reported when it lands in a redzone, which depends on the
    # heap's layout: an artifact found while fuzzing may read mapped memory
    # when replayed alone. Up to three runs, until a crash reproduces.
    for attempt in range(3):
        where = tmp_path / f"run{attempt}"
        where.mkdir()
        res = fuzz.run_fuzzer(BROKEN_SECONDS, _corpus(seeds, where), where / "artifacts", fuzzer=broken)
        assert res["crashes"], f"no crash in {BROKEN_SECONDS} s without the verifier: {res}"
        crash = res["crashes"][0]
        summary = crash["summary"] or ""
        assert crash["kind"] == "crash" and ("AddressSanitizer" in summary or "UndefinedBehaviorSanitizer" in summary), crash
        assert crash["path"] and Path(crash["path"]).is_file()
        if fuzz.replay([crash["path"]], broken).returncode != 0:
            break
    else:
        pytest.fail("three crashes found without the verifier; none reproduced when replayed")
    # The artifact reproduces on the broken build (above) and is refused by the real one.
    assert fuzz.replay([crash["path"]], fuzz.build_fuzzer()).returncode == 0


def test_parse_output() -> None:
    """libFuzzer's output as run_fuzzer reads it (no toolchain needed)."""
    log = """\
INFO: Loaded 1 modules   (4749 inline 8-bit counters): 4749 [0x1, 0x2),
#6	INITED cov: 1585 ft: 2301 corp: 6/49Kb exec/s: 0 rss: 40Mb
#8192	pulse  cov: 1700 ft: 2500 corp: 40/100Kb lim: 4096 exec/s: 4096 rss: 60Mb
/work/main/firmware/kernels/portable/conv/linear_s8.cc:26:14: runtime error: signed integer overflow
SUMMARY: UndefinedBehaviorSanitizer: undefined-behavior linear_s8.cc:26:14 in
MS: 1 ChangeBinInt-; base unit: 0123
artifact_prefix='/tmp/a/'; Test unit written to /tmp/a/crash-abc
stat::number_of_executed_units: 9000
stat::average_exec_per_sec:     4500
stat::new_units_added:          34
stat::slowest_unit_time_sec:    0
stat::peak_rss_mb:              61
"""
    res = fuzz.parse_output(log)
    assert res["executions"] == 9000 and res["exec_per_sec"] == 4500 and res["new_units"] == 34
    assert res["coverage"] == 1700 and res["counters"] == 4749 and res["features"] == 2500
    assert res["crashes"] == [{"kind": "crash", "path": "/tmp/a/crash-abc",
                               "error": "/work/main/firmware/kernels/portable/conv/linear_s8.cc:26:14: runtime error: "
                                        "signed integer overflow",
                               "summary": "UndefinedBehaviorSanitizer: undefined-behavior linear_s8.cc:26:14 in"}]
