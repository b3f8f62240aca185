"""The bench report as one self-contained HTML page: figures embedded as PNG data URIs, tables sortable.

The page renders the same blocks as ``report.md`` (``eval.report_body``). It needs no other file and no network:
styles and the small sorting script are inline, and each figure is the PNG of ``figures/`` in base64. Text
blocks use the Markdown subset the report writes (headings, bullet lists, paragraphs, ``code``, **bold**,
*italics*).
"""

from __future__ import annotations

import base64
import html
import re
from pathlib import Path

from eval.report_body import Block, FigureRef
from eval.tables import Table

#: Width (CSS pixels) of the page's text column; figures are shown at most this wide.
PAGE_WIDTH = 1000

_STYLE = f"""
body {{ font: 15px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: #222;
       max-width: {PAGE_WIDTH}px; margin: 2em auto; padding: 0 1em; }}
h1 {{ font-size: 1.7em; }} h2 {{ font-size: 1.3em; border-bottom: 1px solid #ddd; margin-top: 2em; }}
code {{ font-size: 0.9em; background: #f3f3f3; padding: 0 0.2em; border-radius: 3px; }}
figure {{ margin: 1.2em 0; }} figure img {{ max-width: 100%; height: auto; display: block; }}
figcaption {{ font-size: 0.9em; color: #555; font-style: italic; }}
.tablewrap {{ overflow-x: auto; margin: 1em 0; }}
table {{ border-collapse: collapse; font-size: 0.88em; }}
p.caption {{ font-style: italic; color: #555; margin: 0 0 0.3em 0; font-size: 0.9em; }}
th, td {{ padding: 0.2em 0.6em; text-align: right; white-space: nowrap; }}
tbody th, thead th:first-child, td:not([data-value]) {{ text-align: left; font-weight: normal; }}
thead th {{ border-bottom: 2px solid #444; cursor: pointer; user-select: none; font-weight: 600; }}
thead th[aria-sort="ascending"]::after {{ content: " \\25B2"; }}
thead th[aria-sort="descending"]::after {{ content: " \\25BC"; }}
tbody + tbody {{ border-top: 2px solid #999; }}
tbody tr:nth-child(even) {{ background: #f7f7f7; }}
"""

# Click a header to sort every section (tbody) of that table by the column; again to reverse. Numbers sort by
# the raw value in data-value, other cells by their text. Sections stay apart (the oracle stays last).
_SCRIPT = """
document.querySelectorAll('table.sortable').forEach(function (table) {
  table.querySelectorAll('thead th').forEach(function (th, col) {
    th.addEventListener('click', function () {
      var asc = th.getAttribute('aria-sort') !== 'ascending';
      table.querySelectorAll('thead th').forEach(function (h) { h.removeAttribute('aria-sort'); });
      th.setAttribute('aria-sort', asc ? 'ascending' : 'descending');
      table.querySelectorAll('tbody').forEach(function (body) {
        var rows = Array.prototype.slice.call(body.rows);
        rows.sort(function (a, b) {
          var x = a.cells[col], y = b.cells[col];
          var vx = x.dataset.value, vy = y.dataset.value, d;
          if (vx !== undefined && vy !== undefined) { d = parseFloat(vx) - parseFloat(vy); }
          else if (vx !== undefined) { d = -1; } else if (vy !== undefined) { d = 1; }
          else { d = x.textContent.localeCompare(y.textContent); }
          return asc ? d : -d;
        });
        rows.forEach(function (r) { body.appendChild(r); });
      });
    });
  });
});
"""


def inline(text: str) -> str:
    """One line of the report's Markdown subset as HTML: `code`, **bold**, *italics* (escaped first)."""
    out = []
    for k, part in enumerate(re.split(r"(`[^`]*`)", text)):
        if k % 2:  # inside backticks: literal
            out.append(f"<code>{html.escape(part[1:-1])}</code>")
            continue
        part = html.escape(part, quote=False)
        part = re.sub(r"\*\*(.+?)\*\*", r"<strong>\1</strong>", part)
        part = re.sub(r"(?<![\w*])\*(?!\s)(.+?)(?<!\s)\*(?![\w*])", r"<em>\1</em>", part)
        out.append(part)
    return "".join(out)


def text_block(text: str) -> str:
    """A text block (a heading, a bullet list or paragraphs) as HTML."""
    parts: list[str] = []
    items: list[str] = []
    para: list[str] = []

    def flush() -> None:
        if items:
            parts.append("<ul>" + "".join(f"<li>{inline(i)}</li>" for i in items) + "</ul>")
            items.clear()
        if para:
            parts.append(f"<p>{inline(' '.join(para))}</p>")
            para.clear()

    for line in text.splitlines():
        heading = re.match(r"^(#{1,3}) (.*)$", line)
        if heading:
            flush()
            level = len(heading.group(1))
            parts.append(f"<h{level}>{inline(heading.group(2))}</h{level}>")
        elif line.startswith("- "):
            if para:
                flush()
            items.append(line[2:])
        elif not line.strip():
            flush()
        else:
            if items:
                flush()
            para.append(line.strip())
    flush()
    return "\n".join(parts)


def figure_html(fig: FigureRef, out_dir: Path) -> str:
    """A figure as ``<figure>`` with the PNG embedded as a data URI (the file must exist)."""
    data = base64.b64encode((out_dir / "figures" / f"{fig.stem}.png").read_bytes()).decode("ascii")
    caption = f"<figcaption>{inline(fig.caption)}</figcaption>" if fig.caption else ""
    return (f'<figure id="figure-{html.escape(fig.stem)}"><img src="data:image/png;base64,{data}" '
            f'alt="{html.escape(fig.alt)}">{caption}</figure>')


def render_html(blocks: list[Block], out_dir: Path, title: str = "CoBa bench report") -> str:
    """The whole page for ``blocks``; figures are read from ``out_dir/figures`` and embedded."""
    body = []
    for block in blocks:
        if isinstance(block, Table):
            # The caption sits above the table as a paragraph: a <caption> would wrap to a narrow table's width.
            body.append(f'<div class="tablewrap"><p class="caption">{html.escape(block.caption)}</p>'
                        f'{block.to_html(caption=False)}</div>')
        elif isinstance(block, FigureRef):
            body.append(figure_html(block, out_dir))
        elif block:
            body.append(text_block(block))
    return (f'<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
            f'<meta name="viewport" content="width=device-width, initial-scale=1">\n'
            f"<title>{html.escape(title)}</title>\n<style>{_STYLE}</style>\n</head>\n<body>\n"
            + "\n".join(body) + f"\n<script>{_SCRIPT}</script>\n</body>\n</html>\n")
