"""The commit a bench table's figures are measured at: every table says it."""

from __future__ import annotations

import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def measured_at() -> str:
    """HEAD's short hash, with "+ changes" when the tracked tree differs from it."""

    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True).stdout.strip()

    head = git("rev-parse", "--short", "HEAD") or "unknown"
    return head + (" + changes" if git("status", "--porcelain", "--untracked-files=no") else "")
