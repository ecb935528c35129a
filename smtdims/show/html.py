"""HTML tables for notebooks: every cell left-aligned.

Used by every ``_repr_html_`` (the answers, explanations, reports, the audit), so it imports
nothing and stays cheap.
"""

from __future__ import annotations

from collections.abc import Iterable

# Jupyter's stylesheet right-aligns table cells (``.jp-RenderedHTMLCommon td``); a rule on the
# <table> would lose to it, so every cell carries its own style.
_CELL_STYLE = "text-align: left; vertical-align: top"


def table_style() -> str:
    """The inline CSS every ``<td>``/``<th>`` of an smtdims table carries: ``<td style="...">``."""
    return _CELL_STYLE


def html_row(cells: Iterable[str], *, header: bool = False) -> str:
    """``<tr>`` of left-aligned cells; ``cells`` are HTML already (escape text first)."""
    tag = "th" if header else "td"
    return "<tr>" + "".join(f'<{tag} style="{_CELL_STYLE}">{c}</{tag}>' for c in cells) + "</tr>"


def left_align(html: str) -> str:
    """Give every plain ``<td>``/``<th>`` in ``html`` the left-aligned style (Jupyter right-aligns them)."""
    return html.replace("<td>", f'<td style="{_CELL_STYLE}">').replace("<th>", f'<th style="{_CELL_STYLE}">')


def html_table(rows: Iterable[Iterable[str]], header: Iterable[str] | None = None) -> str:
    """A ``<table>`` of left-aligned cells (HTML strings); ``header`` is the first row, as ``<th>``."""
    head = html_row(header, header=True) if header is not None else ""
    return "<table>" + head + "".join(html_row(r) for r in rows) + "</table>"


__all__ = ["html_row", "html_table", "left_align", "table_style"]
