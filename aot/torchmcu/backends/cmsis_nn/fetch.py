"""Third-party code torchmcu can fetch for its user: `torchmcu deps cmsis-nn`.

torchmcu ships no CMSIS-NN. A user who is online can have the ARM::CMSIS-NN
CMSIS-Pack fetched and cached with cmsis-pack-manager (PyPI): it reads a pack
index, downloads the pack descriptions into the cache, then the CMSIS-NN pack,
which is unpacked beside them. The unpacked folder is recorded in
<cache>/cmsis-nn.json, and `torchmcu build --kernels cmsis-nn` uses it when
TORCHMCU_CMSIS_NN_DIR is unset (torchmcu.backends.cmsis_nn.build.cmsis_nn_dir).

The cache is $TORCHMCU_CACHE_DIR, else $XDG_CACHE_HOME/torchmcu, else
~/.cache/torchmcu. The index is cmsis-pack-manager's default (the public CMSIS
pack index) unless --index-url names another (a .pidx or .vidx URL, e.g. a
company mirror).

Offline, the command fails with the manual alternative: point
TORCHMCU_CMSIS_NN_DIR at a CMSIS-NN checkout.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ...errors import TorchMCUError

CACHE_ENV = "TORCHMCU_CACHE_DIR"
CMSIS_NN_ENV = "TORCHMCU_CMSIS_NN_DIR"  # the same variable the build reads (build.py)
CMSIS_NN_VENDOR, CMSIS_NN_PACK = "ARM", "CMSIS-NN"
RECORD = "cmsis-nn.json"

MANUAL = (f"Without network access, set {CMSIS_NN_ENV} to a CMSIS-NN checkout instead (the folder holding "
          "Include/ and Source/, e.g. a clone of the ARM-software/CMSIS-NN repository), then build with "
          "`torchmcu build DIR --kernels cmsis-nn`.")


class DepsError(TorchMCUError):
    """A dependency could not be fetched; the message says what to do instead."""


def cache_dir() -> Path:
    value = os.environ.get(CACHE_ENV)
    if value:
        return Path(value).expanduser().resolve()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base).expanduser().resolve() / "torchmcu"


def is_cmsis_nn_root(path: Path) -> bool:
    return (path / "Include" / "arm_nnfunctions.h").is_file() and (path / "Source").is_dir()


def cached_cmsis_nn_dir(cache: Path | None = None) -> Path | None:
    """The CMSIS-NN folder `torchmcu deps cmsis-nn` recorded, if it is still there."""
    record = (cache or cache_dir()) / RECORD
    try:
        path = Path(json.loads(record.read_text())["path"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return path if is_cmsis_nn_root(path) else None


@dataclass
class Fetched:
    path: Path  # the unpacked pack: Include/, Source/
    version: str
    pack: Path  # the .pack file in cmsis-pack-manager's cache
    record: Path


def _version_key(version: str) -> tuple:
    """Orders "6.0.0" after "5.10.2" and a release after its pre-releases."""
    core, _, pre = version.partition("-")
    nums = tuple(int(p) if p.isdigit() else 0 for p in core.split("."))
    return (nums, pre == "", pre)


def _latest(paths: list[Path], pattern: re.Pattern[str]) -> tuple[str, Path] | None:
    found = [(m.group(1), p) for p in paths if (m := pattern.fullmatch(p.name))]
    return max(found, key=lambda vp: _version_key(vp[0])) if found else None


def _unpack(pack: Path, dest: Path) -> None:
    """Unpack PACK into DEST (written beside it, then renamed: never half there)."""
    tmp = dest.with_name(dest.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        with zipfile.ZipFile(pack) as z:
            for name in z.namelist():
                if name.startswith("/") or ".." in Path(name).parts:
                    raise DepsError(f"{pack} holds an unsafe path {name!r}; not unpacking it")
            z.extractall(tmp)
    except zipfile.BadZipFile as e:
        raise DepsError(f"{pack} is not a valid pack (zip): {e}. Delete it and run the command again.") from None
    shutil.rmtree(dest, ignore_errors=True)
    tmp.rename(dest)


def fetch_cmsis_nn(index_url: str | None = None, cache: Path | None = None,
                   log: Callable[[str], None] = print) -> Fetched:
    """Fetch (or reuse) the ARM::CMSIS-NN pack, unpack it, record where."""
    try:
        from cmsis_pack_manager import Cache, CmsisPackRef
    except ImportError as e:
        raise DepsError(f"cmsis-pack-manager is not installed ({e}); install it with "
                        f"`pip install cmsis-pack-manager`. {MANUAL}") from None
    cache = cache or cache_dir()
    packs = cache / "packs"  # cmsis-pack-manager's pack store: *.pdsc, <vendor>/<name>/<version>.pack
    index_json = cache / "index"
    for d in (packs, index_json):
        d.mkdir(parents=True, exist_ok=True)
    vidx_list = None
    if index_url:
        vidx_list = cache / "index.list"  # cmsis-pack-manager reads index URLs from a file, one a line
        vidx_list.write_text(index_url + "\n")
    where = index_url or "cmsis-pack-manager's default pack index"
    manager = Cache(True, False, json_path=str(index_json), data_path=str(packs),
                    vidx_list=str(vidx_list) if vidx_list else None)

    log(f"reading the pack index ({where}) into {packs}")
    try:
        manager.cache_descriptors()
    except Exception as e:  # noqa: BLE001 - the Rust side raises plain Exceptions; the check below decides
        log(f"the pack index could not be read: {e}")
    pdsc = _latest(list(packs.glob(f"{CMSIS_NN_VENDOR}.{CMSIS_NN_PACK}.*.pdsc")),
                   re.compile(rf"{CMSIS_NN_VENDOR}\.{CMSIS_NN_PACK}\.(.+)\.pdsc"))
    if pdsc is None:
        raise DepsError(f"could not fetch the {CMSIS_NN_VENDOR}::{CMSIS_NN_PACK} pack description from {where}: "
                        f"the index is unreachable (no network?) or does not list the pack. {MANUAL}")
    version = pdsc[0]
    log(f"downloading {CMSIS_NN_VENDOR}::{CMSIS_NN_PACK} {version}")
    try:
        manager.download_pack_list([CmsisPackRef(CMSIS_NN_VENDOR, CMSIS_NN_PACK, version)])
    except Exception as e:  # noqa: BLE001 - as above
        log(f"the pack download failed: {e}")
    pack = _latest(list((packs / CMSIS_NN_VENDOR / CMSIS_NN_PACK).glob("*.pack")), re.compile(r"(.+)\.pack"))
    if pack is None:
        raise DepsError(f"could not download the {CMSIS_NN_VENDOR}::{CMSIS_NN_PACK} {version} pack named by "
                        f"{packs / pdsc[1].name} (no network, or its server refused). {MANUAL}")
    version, pack_path = pack
    dest = cache / "cmsis-nn" / version
    if not is_cmsis_nn_root(dest):
        _unpack(pack_path, dest)
    if not is_cmsis_nn_root(dest):
        raise DepsError(f"{pack_path} unpacked into {dest} holds no Include/arm_nnfunctions.h and Source/: "
                        f"not a CMSIS-NN pack. {MANUAL}")
    record = cache / RECORD
    tmp = record.with_suffix(".tmp")
    tmp.write_text(json.dumps({"path": str(dest), "version": version, "pack": str(pack_path)}, indent=2) + "\n")
    tmp.replace(record)
    return Fetched(dest, version, pack_path, record)
