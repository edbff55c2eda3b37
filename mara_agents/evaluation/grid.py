"""A results table as data (rows × columns of mean ± std cells) and its Markdown rendering.

Every experiment's output is a :class:`Grid`, so one renderer, one JSON form and one paper-vs-ours
comparison serve all of them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from mara_agents.evaluation.stats import Stat

Value = Stat | str | None  # a statistic, a text cell (e.g. "skipped"), or empty


@dataclass
class Grid:
    """One table: ``cells[row][col]``; ``decimals`` per column or row (default 2); ``note`` is printed below."""

    name: str
    title: str
    row_header: str
    rows: list[str]
    cols: list[str]
    cells: dict[str, dict[str, Value]] = field(default_factory=dict)
    decimals: dict[str, int] = field(default_factory=dict)
    note: str = ""

    def set(self, row: str, col: str, value: Value) -> None:
        self.cells.setdefault(row, {})[col] = value

    def get(self, row: str, col: str) -> Value:
        return self.cells.get(row, {}).get(col)

    def to_json(self) -> dict[str, Any]:
        """Plain JSON (statistics as {mean, std, runs})."""
        return {"title": self.title, "row_header": self.row_header, "rows": self.rows, "cols": self.cols,
                "cells": {r: {c: v.to_json() if isinstance(v, Stat) else v for c, v in cols.items()}
                          for r, cols in self.cells.items()},
                "note": self.note}


def format_value(value: Value, decimals: int = 2) -> str:
    """``mean ± std`` (just the mean when the std is undefined), text as is, ``—`` when empty."""
    if value is None:
        return "—"
    if isinstance(value, str):
        return value
    if math.isnan(value.mean):
        return "—"
    if math.isnan(value.std):
        return f"{value.mean:.{decimals}f}"
    return f"{value.mean:.{decimals}f} ± {value.std:.{decimals}f}"


def markdown(grid: Grid) -> str:
    """The grid as a Markdown table with its title above and its note below."""
    lines = [f"**{grid.title}**", "", "| " + " | ".join([grid.row_header, *grid.cols]) + " |",
             "|" + "---|" + "---:|" * len(grid.cols)]
    for row in grid.rows:
        cells = [format_value(grid.get(row, col), grid.decimals.get(col, grid.decimals.get(row, 2)))
                 for col in grid.cols]
        lines.append("| " + " | ".join([row, *cells]) + " |")
    if grid.note:
        lines += ["", grid.note]
    return "\n".join(lines) + "\n"
