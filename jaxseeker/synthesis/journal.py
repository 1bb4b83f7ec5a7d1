"""The journal of a `synthesize` run: each episode's outcome appended as it finishes, so a stopped run resumes.

A JSONL file whose first line holds a key of the run's inputs; every later line is one episode's outcome
(`{"round", "index", "passed", "failed", "reason", "record"}`) or the teacher errors of a round. A rerun with the
same key replays the outcomes instead of rolling those episodes out again; one with another key is refused,
since its episodes answer other questions or come from another teacher.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from jaxseeker.errors import InputError
from jaxseeker.jsonl import drop_torn_tail, json_lines


class Journal:
    """Outcomes by (round, question index) of the run recorded at `path`, and the appender of new ones."""

    def __init__(self, path: str | Path, key: str):
        self.path = Path(path)
        self.outcomes: dict[tuple[int, int], dict[str, Any]] = {}
        self.teacher_errors: dict[int, list[str]] = {}
        if self.path.exists() and self.path.stat().st_size:
            drop_torn_tail(self.path)  # the outcome a killed run was writing
            lines = json_lines(self.path)
            _, header = next(lines, (1, None))
            if not isinstance(header, dict) or header.get("key") != key:
                raise InputError(
                    f"{self.path}: holds the episodes of a run with other inputs (another questions "
                    "file, teacher, filters or seed); remove it to start anew"
                )
            for line_no, entry in lines:
                if not isinstance(entry, dict) or not isinstance(entry.get("round"), int):
                    raise InputError(f"{self.path}:{line_no}: not a journal entry")
                self._keep(entry)
            self._file = self.path.open("a", encoding="utf-8")
        else:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._file = self.path.open("w", encoding="utf-8")
            self._append({"key": key})

    def add(self, entry: dict[str, Any]) -> None:
        """Record an episode's outcome, or a round's `teacher_errors`, at once (a kill loses at most this line)."""
        self._keep(entry)
        self._append(entry)

    def close(self) -> None:
        """Close the file (it stays until the caller removes it)."""
        self._file.close()

    def _keep(self, entry: dict[str, Any]) -> None:
        if "teacher_errors" in entry:
            self.teacher_errors.setdefault(entry["round"], []).extend(entry["teacher_errors"])
        else:
            self.outcomes[entry["round"], entry["index"]] = entry

    def _append(self, entry: dict[str, Any]) -> None:
        self._file.write(json.dumps(entry, ensure_ascii=False) + "\n")
        self._file.flush()
