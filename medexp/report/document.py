"""A small document model and its two renderings, Markdown and self-contained HTML.

The report is built once as a list of blocks (headings, paragraphs, bullet lists, tables,
images) holding inline pieces (text, code, strong, status words, links); each renderer escapes
text for its own format, so the .md and .html files always say the same thing.
"""

from __future__ import annotations

import base64
import html
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence


@dataclass(frozen=True)
class Code:
    text: str


@dataclass(frozen=True)
class Strong:
    text: str


@dataclass(frozen=True)
class Status:
    word: str
    outcome: str  # holds, fails, no evidence, underpowered, confounded or not run: the HTML colour


@dataclass(frozen=True)
class Link:
    text: str
    href: str


Inline = str | Code | Strong | Status | Link
Text = Sequence[Inline]


@dataclass(frozen=True)
class Heading:
    level: int
    text: str
    anchor: str | None = None


@dataclass(frozen=True)
class Paragraph:
    parts: Text


@dataclass(frozen=True)
class Bullets:
    items: Sequence[Text]


@dataclass(frozen=True)
class Table:
    header: Sequence[str]
    rows: Sequence[Sequence[Text]]


@dataclass(frozen=True)
class Image:
    path: str  # relative to the document
    caption: str


Block = Heading | Paragraph | Bullets | Table | Image

_MARKDOWN_SPECIAL = re.compile(r"([\\`*_\[\]|<>#])")


def to_markdown(blocks: Sequence[Block]) -> str:
    out = []
    for block in blocks:
        if isinstance(block, Heading):
            anchor = f'<a id="{block.anchor}"></a>\n' if block.anchor else ""
            out.append(f"{anchor}{'#' * block.level} {_md_text(block.text)}")
        elif isinstance(block, Paragraph):
            out.append(_md_inline(block.parts))
        elif isinstance(block, Bullets):
            out.append("\n".join(f"- {_md_inline(item)}" for item in block.items))
        elif isinstance(block, Table):
            lines = [f"| {' | '.join(_md_text(name) for name in block.header)} |",
                     f"|{'|'.join(' --- ' for _ in block.header)}|"]
            lines += [f"| {' | '.join(_md_inline(cell) for cell in row)} |" for row in block.rows]
            out.append("\n".join(lines))
        else:
            out.append(f"![{_md_text(block.caption)}]({block.path})\n\n*{_md_text(block.caption)}*")
    return "\n\n".join(out) + "\n"


def to_html(blocks: Sequence[Block], title: str, base_dir: Path) -> str:
    """A self-contained page: images are embedded as data URIs read from ``base_dir``."""
    body = []
    for block in blocks:
        if isinstance(block, Heading):
            anchor = f' id="{html.escape(block.anchor)}"' if block.anchor else ""
            body.append(f"<h{block.level}{anchor}>{html.escape(block.text)}</h{block.level}>")
        elif isinstance(block, Paragraph):
            body.append(f"<p>{_html_inline(block.parts)}</p>")
        elif isinstance(block, Bullets):
            body.append("<ul>" + "".join(f"<li>{_html_inline(item)}</li>" for item in block.items) + "</ul>")
        elif isinstance(block, Table):
            head = "".join(f"<th>{html.escape(name)}</th>" for name in block.header)
            rows = "".join("<tr>" + "".join(f"<td>{_html_inline(cell)}</td>" for cell in row) + "</tr>"
                           for row in block.rows)
            body.append(f"<table><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>")
        else:
            data = base64.b64encode((base_dir / block.path).read_bytes()).decode("ascii")
            body.append(f'<figure><img src="data:image/png;base64,{data}" alt="{html.escape(block.caption)}">'
                        f"<figcaption>{html.escape(block.caption)}</figcaption></figure>")
    return _HTML_PAGE.format(title=html.escape(title), body="\n".join(body))


def _md_text(text: str) -> str:
    """Text with Markdown's special characters escaped and line breaks folded into spaces."""
    return _MARKDOWN_SPECIAL.sub(r"\\\1", re.sub(r"\s+", " ", str(text)))


def _md_inline(parts: Text) -> str:
    out = []
    for part in parts:
        if isinstance(part, Code):
            fence = "``" if "`" in part.text else "`"
            out.append(f"{fence}{part.text.replace('|', chr(92) + '|')}{fence}")
        elif isinstance(part, (Strong, Status)):
            out.append(f"**{_md_text(part.text if isinstance(part, Strong) else part.word)}**")
        elif isinstance(part, Link):
            out.append(f"[{_md_text(part.text)}]({part.href})")
        else:
            out.append(_md_text(part))
    return "".join(out)


def _html_inline(parts: Text) -> str:
    out = []
    for part in parts:
        if isinstance(part, Code):
            out.append(f"<code>{html.escape(part.text)}</code>")
        elif isinstance(part, Strong):
            out.append(f"<strong>{html.escape(part.text)}</strong>")
        elif isinstance(part, Status):
            kind = part.outcome.replace(" ", "-")
            out.append(f'<strong class="status {kind}">{html.escape(part.word)}</strong>')
        elif isinstance(part, Link):
            out.append(f'<a href="{html.escape(part.href)}">{html.escape(part.text)}</a>')
        else:
            out.append(html.escape(str(part)))
    return "".join(out)


_HTML_PAGE = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>{title}</title>
<style>
body {{ font-family: system-ui, sans-serif; max-width: 72rem; margin: 2rem auto; padding: 0 1rem; line-height: 1.45; }}
table {{ border-collapse: collapse; margin: 0.5rem 0 1rem; font-size: 0.9rem; }}
th, td {{ border: 1px solid #ccc; padding: 0.25rem 0.5rem; text-align: left; vertical-align: top; }}
th {{ background: #f3f3f3; }}
code {{ background: #f5f5f5; padding: 0 0.2rem; }}
.status.holds {{ color: #1a7f37; }}
.status.fails {{ color: #b3261e; }}
.status.no-evidence {{ color: #8a6d00; }}
.status.underpowered {{ color: #8a6d00; }}
.status.confounded {{ color: #8a6d00; }}
.status.not-run {{ color: #6b6b6b; }}
figure img {{ max-width: 100%; }}
figcaption {{ font-style: italic; font-size: 0.9rem; }}
</style>
</head>
<body>
{body}
</body>
</html>
"""
