"""Text fitted to a terminal's width: a failure report, a golden's message or a summary line
in 80 columns. Layout only: every word of the text stays, in its order.

- A line that fits stays as it is.
- Prose wraps at spaces, never inside a short bracket (`(4, 989)`, `[1e-7, 1e-6)`), its
  continuation lines indented two more than the line.
- A table keeps its columns: rows under a head ending in ':' and indented more (the error
  histogram), or rows aligned with the cells of a `label:  cells` head (the worst elements).
  When it is too wide its label goes on a line of its own, the rows move left to two more
  than the head, then the gaps between columns shrink, down to one space; a row still too
  wide wraps as prose.
- What follows a line ending in 'with:' (a command to copy) and a word longer than the width
  (a path, a node id) are never broken: they may overflow.
"""

from __future__ import annotations

import re
import textwrap

#: Spaces inside brackets this short never break: indices, shapes, decades.
_BRACKET = re.compile(r"[(\[][^()\[\]]{0,24}[)\]]")
_KEEP = "\x00"  # stands for a space that must not break while wrapping
#: 'worst elements:  index  actual ...': a label, two spaces or more, the first cells.
_LABELLED = re.compile(r"^( *)([^ :][^:]*:)( {2,})(\S.*)$")


def fit_text(text: str, width: int) -> str:
    """`text` with every line fitted to `width` columns (see the module doc)."""
    lines = text.split("\n")
    out: list[str] = []
    index = 0
    while index < len(lines):
        line = lines[index]
        end = _block_end(lines, index)
        if end > index + 1:
            out.extend(_fit_block(line, lines[index + 1 : end], width))
        else:
            out.extend(wrap(line, width))
        index = max(end, index + 1)
    return "\n".join(out)


def wrap(line: str, width: int) -> list[str]:
    """One line of prose wrapped to `width`, continuation lines indented two more."""
    if len(line) <= width:
        return [line]
    indent = _indent(line)
    guarded = _BRACKET.sub(lambda m: m.group().replace(" ", _KEEP), line[indent:])
    wrapper = textwrap.TextWrapper(
        width=width,
        initial_indent=" " * indent,
        subsequent_indent=" " * (indent + 2),
        break_long_words=False,
        break_on_hyphens=False,
    )
    return [part.replace(_KEEP, " ") for part in wrapper.wrap(guarded)] or [line]


def abbreviate(text: str, width: int) -> str:
    """`text` cut in the middle with '…' to at most `width` columns (at least 5 kept)."""
    if len(text) <= width:
        return text
    keep = max(width - 1, 4)
    head = (keep + 1) // 2
    return f"{text[:head]}…{text[len(text) - (keep - head) :]}"


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def _block_end(lines: list[str], start: int) -> int:
    """The end of the block that `lines[start]` heads (start + 1: no block)."""
    head = lines[start]
    labelled = _LABELLED.match(head)
    if labelled:
        column = len(labelled.group(1) + labelled.group(2) + labelled.group(3))
        end = start + 1
        while end < len(lines) and lines[end].strip() and _indent(lines[end]) == column:
            end += 1
        return end
    if head.rstrip().endswith(":"):
        end = start + 1
        while end < len(lines) and lines[end].strip() and _indent(lines[end]) > _indent(head):
            end += 1
        return end
    return start + 1


def _fit_block(head: str, rows: list[str], width: int) -> list[str]:
    if max(len(head), *map(len, rows)) <= width:
        return [head, *rows]
    if head.rstrip().endswith("with:"):  # a command to copy: whole
        return [*wrap(head, width), *rows]
    labelled = _LABELLED.match(head)
    if labelled:  # the head's cells are the table's first row; the label stands alone
        cells = " " * labelled.start(4) + labelled.group(4)
        head, rows = labelled.group(1) + labelled.group(2), [cells, *rows]
    indent = min(map(_indent, rows))
    table = _shrink([row[indent:] for row in rows], width - _indent(head) - 2)
    body = [" " * (_indent(head) + 2) + row for row in table]
    return [*wrap(head, width), *(part for row in body for part in wrap(row, width))]


def _shrink(rows: list[str], width: int) -> list[str]:
    """Narrow the gaps (columns blank in every row) until the rows fit `width`, widest gap
    first, never below one space: the columns stay aligned, left or right."""
    size = max(map(len, rows))
    grid = [list(row.ljust(size)) for row in rows]
    while size > width:
        gaps = _gaps(grid, size)
        widest = max(gaps, key=lambda gap: gap[1] - gap[0], default=None)
        if widest is None or widest[1] - widest[0] < 2:
            break
        for row in grid:
            del row[widest[0]]
        size -= 1
    return ["".join(row).rstrip() for row in grid]


def _gaps(grid: list[list[str]], size: int) -> list[tuple[int, int]]:
    """[start, end) of each run of columns blank in every row, inside the rows."""
    blank = [all(row[column] == " " for row in grid) for column in range(size)]
    gaps, start = [], None
    for column, empty in enumerate(blank):
        if empty and start is None:
            start = column
        elif not empty and start is not None:
            if start > 0:  # leading blanks are the indent, not a gap
                gaps.append((start, column))
            start = None
    return gaps


def counted(count: int, noun: str) -> str:
    """'1 report', '3 reports'."""
    return f"{count} {noun}{'' if count == 1 else 's'}"
