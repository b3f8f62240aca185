"""A table of raw values rendered as Markdown, CSV, LaTeX (booktabs) or HTML, and the paper's number formats.

A ``Table`` holds raw values; formatting happens per renderer, so the CSV keeps full precision while the
Markdown, LaTeX and HTML use the paper's formats (accuracy 2 decimals, tokens in thousands "58.0k", calls 2
decimals, latency 1 decimal). Rows come in sections separated by a rule (the oracle always sits alone in
the last section, as an upper bound). Bold marks the best non-oracle value where the paper bolds one.
"""

from __future__ import annotations

import csv
import html
import io
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


def fmt_acc(v: Any) -> str:
    """Accuracy in percent, 2 decimals."""
    return _num(v, "{:.2f}")


def fmt_acc1(v: Any) -> str:
    """Accuracy in percent, 1 decimal (per-dataset tables)."""
    return _num(v, "{:.1f}")


def fmt_k(v: Any) -> str:
    """A token count in thousands with one decimal: 58013 -> '58.0k'."""
    if _missing(v):
        return "-"
    return f"{float(v) / 1000:.1f}k"


def fmt_2(v: Any) -> str:
    """Two decimals."""
    return _num(v, "{:.2f}")


def fmt_1(v: Any) -> str:
    """One decimal."""
    return _num(v, "{:.1f}")


def fmt_signed(v: Any) -> str:
    """A signed difference with 2 decimals: '+3.74'."""
    return _num(v, "{:+.2f}")


def fmt_times(v: Any) -> str:
    """A ratio as '2.43x'."""
    return _num(v, "{:.2f}x")


def fmt_pct(v: Any) -> str:
    """A share in [0, 1] as a percentage with one decimal."""
    return "-" if _missing(v) else f"{100 * float(v):.1f}%"


def fmt_text(v: Any) -> str:
    """Plain text."""
    return "" if v is None else str(v)


def _missing(v: Any) -> bool:
    return v is None or (isinstance(v, float) and math.isnan(v))


def _num(v: Any, pattern: str) -> str:
    return "-" if _missing(v) else pattern.format(float(v))


@dataclass
class Column:
    """One column: the row key it shows, its header, formatter, and which direction is better."""

    key: str
    header: str
    fmt: Callable[[Any], str] = fmt_text
    better: str | None = None  # "up", "down" or None
    csv_only: bool = False  # raw keys such as the policy name: in the CSV, not in Markdown or LaTeX
    #: The row may carry ``<key>_low`` and ``<key>_high``, an interval shown after the value ("62.35 [58.1, 66.4]")
    #: and written to the CSV as two more columns.
    interval: bool = False

    def text(self, row: dict[str, Any]) -> str:
        """The cell of ``row``: its value formatted, then its interval when the column has one and the row too."""
        text = self.fmt(row.get(self.key))
        lo, hi = row.get(f"{self.key}_low"), row.get(f"{self.key}_high")
        if self.interval and not _missing(lo) and not _missing(hi) and text != "-":
            text += f" [{self.fmt(lo)}, {self.fmt(hi)}]"
        return text

    @property
    def csv_keys(self) -> list[str]:
        """The CSV columns of this column: its key, then the interval's two bounds when it has one."""
        return [self.key, f"{self.key}_low", f"{self.key}_high"] if self.interval else [self.key]

    def title(self, arrows: bool = True) -> str:
        """The header, with an up/down arrow when ``better`` is set."""
        if not arrows or self.better is None:
            return self.header
        return f"{self.header} {'↑' if self.better == 'up' else '↓'}"


@dataclass
class Table:
    """A table: named columns, rows (dicts of raw values) in sections, bold cells, caption and notes."""

    name: str
    caption: str
    columns: list[Column]
    sections: list[list[dict[str, Any]]]
    bold: set[tuple[int, int, str]] = field(default_factory=set)  # (section, row, column key)
    notes: str = ""

    @property
    def shown(self) -> list[Column]:
        """The columns Markdown and LaTeX show (all but ``csv_only`` ones)."""
        return [c for c in self.columns if not c.csv_only]

    @property
    def rows(self) -> list[dict[str, Any]]:
        """All rows, sections flattened."""
        return [r for s in self.sections for r in s]

    def to_markdown(self) -> str:
        """GitHub-flavoured Markdown (no section rules; bold as **x**)."""
        shown = self.shown
        head = "| " + " | ".join(c.title() for c in shown) + " |"
        align = "|" + "|".join(":---" if i == 0 else "---:" for i, _ in enumerate(shown)) + "|"
        lines = [head, align]
        for s, section in enumerate(self.sections):
            for r, row in enumerate(section):
                cells = []
                for c in shown:
                    text = c.text(row).replace("|", "\\|")
                    cells.append(f"**{text}**" if (s, r, c.key) in self.bold and text else text)
                lines.append("| " + " | ".join(cells) + " |")
        return "\n".join(lines) + "\n"

    def to_csv(self) -> str:
        """CSV with raw (unformatted) values and the column keys as the header."""
        buf = io.StringIO()
        writer = csv.writer(buf, lineterminator="\n")
        keys = [k for c in self.columns for k in c.csv_keys]
        writer.writerow(keys)
        for row in self.rows:
            writer.writerow(["" if _missing(row.get(k)) else row.get(k) for k in keys])
        return buf.getvalue()

    def to_latex(self) -> str:
        """A booktabs ``table`` environment with caption and label ``tab:<name>``."""
        shown = self.shown
        spec = "@{}l" + "c" * (len(shown) - 1) + "@{}"
        head = " & ".join(r"\textbf{" + _tex(c.header) + "}" + _arrow_tex(c.better) for c in shown)
        lines = [r"\begin{table}[!t]", r"\centering", r"\small", rf"\begin{{tabular}}{{{spec}}}", r"\toprule",
                 head + r" \\", r"\midrule"]
        for s, section in enumerate(self.sections):
            if s > 0:
                lines.append(r"\midrule")
            for r, row in enumerate(section):
                cells = []
                for c in shown:
                    text = _tex(c.text(row))
                    cells.append(r"\textbf{" + text + "}" if (s, r, c.key) in self.bold and text else text)
                lines.append(" & ".join(cells) + r" \\")
        lines += [r"\bottomrule", r"\end{tabular}", rf"\caption{{{_tex(self.caption)}}}",
                  rf"\label{{tab:{self.name}}}", r"\end{table}"]
        return "\n".join(lines) + "\n"


    def to_html(self, caption: bool = True) -> str:
        """An HTML ``<table>`` (with its ``<caption>`` unless ``caption`` is False; one ``<tbody>`` per section;
        bold cells); every cell carries its raw value in ``data-value`` so a script can sort the rows of each
        section by any column."""
        shown = self.shown
        cap = f"<caption>{_html(self.caption)}</caption>" if caption else ""
        out = [f'<table class="sortable" id="table-{_html(self.name)}">{cap}',
               "<thead><tr>" + "".join(f'<th scope="col" title="click to sort">{_html(c.title())}</th>'
                                       for c in shown) + "</tr></thead>"]
        for s, section in enumerate(self.sections):
            out.append("<tbody>")
            for r, row in enumerate(section):
                cells = []
                for k, c in enumerate(shown):
                    raw = row.get(c.key)
                    text = _html(c.text(row))
                    if (s, r, c.key) in self.bold and text:
                        text = f"<strong>{text}</strong>"
                    value = "" if _missing(raw) or isinstance(raw, bool) or not isinstance(raw, int | float) \
                        else f' data-value="{float(raw)!r}"'
                    tag = "th scope=\"row\"" if k == 0 else "td"
                    cells.append(f"<{tag}{value}>{text}</{tag.split()[0]}>")
                out.append("<tr>" + "".join(cells) + "</tr>")
            out.append("</tbody>")
        out.append("</table>")
        return "\n".join(out) + "\n"


def _html(text: Any) -> str:
    return html.escape(str(text), quote=True)


def _arrow_tex(better: str | None) -> str:
    if better == "up":
        return r"~$\uparrow$"
    if better == "down":
        return r"~$\downarrow$"
    return ""


_TEX_ESCAPES = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_",
                "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}",
                "↑": r"$\uparrow$", "↓": r"$\downarrow$", "≤": r"$\le$", "−": "-"}


def _tex(text: str) -> str:
    return "".join(_TEX_ESCAPES.get(ch, ch) for ch in str(text))


@dataclass(frozen=True)
class FigureRef:
    """A figure of the report: ``figures/<stem>.png``, its alt text and the caption printed under it."""

    stem: str
    alt: str
    caption: str = ""
