"""The commit a bench table's figures are measured at: every table says it."""

from __future__ import annotations

import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def measured_at() -> str:
    """HEAD's short hash, with "+ changes" when the tracked tree differs from it
    (the bench's own tables and figures, bench/*.md and *.json, aside)."""

    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True).stdout.strip()

    head = git("rev-parse", "--short", "HEAD") or "unknown"
    changed = git("status", "--porcelain", "--untracked-files=no", "--", ".", ":!bench/*.md", ":!bench/*.json")
    return head + (" + changes" if changed else "")
