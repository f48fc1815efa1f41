"""Reading the MLflow UI's runs table out of a page's DOM (as ``chromium --dump-dom`` writes it)."""

from __future__ import annotations

from html.parser import HTMLParser

# Elements without an end tag: they open no scope.
_VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}


class _Cells(HTMLParser):
    """The text of every cell of the table's grid (ag-grid): a row is an element with a ``row-id``,
    a cell one with a ``col-id`` inside it. A row split over the grid's pinned and scrolled parts
    is one row here."""

    def __init__(self):
        super().__init__()
        self.scopes: list[tuple[str | None, str | None]] = [(None, None)]
        self.cells: dict[str, dict[str, str]] = {}

    def handle_starttag(self, tag, attrs):
        if tag in _VOID:
            return
        row, column = self.scopes[-1]
        found = dict(attrs)
        row = found.get("row-id", row)
        column = found.get("col-id", column) if row is not None else None
        self.scopes.append((row, column))
        if row is not None and column is not None:
            self.cells.setdefault(row, {}).setdefault(column, "")

    def handle_endtag(self, tag):
        if tag not in _VOID and len(self.scopes) > 1:
            self.scopes.pop()

    def handle_data(self, data):
        row, column = self.scopes[-1]
        if row is not None and column is not None:
            self.cells[row][column] += data.strip()


def table_cells(dom: str) -> dict[str, dict[str, str]]:
    """Row id -> column id -> the cell's text."""
    parser = _Cells()
    parser.feed(dom)
    return parser.cells
