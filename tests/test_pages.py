"""#52: every table of figures on the README and the docs pages comes from a committed raw file.

A table with figures carries a comment just above it, invisible when rendered:

    <!-- figures: benchmarks/results/FILE [FILE ...] -->   every figure of the table is in one of these files
    <!-- figures: tests/FILE.py::test_name -->             a test regenerates the table and holds the page to it

A table with figures and no such comment fails, so does a figure its files do not hold, and so does a named
test that does not exist. Prose is held the same way between `<!-- figures below: FILE ... -->` and
`<!-- end figures -->` (dates, code spans, and names such as w256 or L32 are not figures). Pages under docs/history/ are
records and are not checked (docs/decisions.md, decision 73).
"""

import glob
import os
import re

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PAGES = ["README.md", *sorted(os.path.relpath(p, ROOT) for p in glob.glob(os.path.join(ROOT, "docs", "*.md")))]
MARK = re.compile(r"<!--\s*figures:\s*(.*?)\s*-->")
# a figure: digits with a decimal part, or a whole number of 2+ digits (1-digit counts and ordinals are prose)
FIGURE = re.compile(r"(?<![\w.^])\d[\d,]*\.\d+(?![\w.])|(?<![\w.^,])\d{1,3}(?:,\d{3})+(?![\w.])|(?<![\w.^,])\d{2,}(?![\w.]|,\d)")
MIN_FIGURES = 4  # a table with fewer is a definition (a format, a limit), not a measurement


# a reference, not a figure: "decision 114", "decisions 83 and 112", "decisions 94-103", an issue's "#50"
REFERENCE = re.compile(r"\bdecisions?\s+\d+(?:\s*(?:-|,|and|to)\s*\d+)*|#\d+", re.I)


def figures(text: str) -> set[str]:
    """Figures as written, commas dropped: '1,228' and '1228' are one figure; signs and units are left aside, and
    so are references to decisions and issues (a decision's number in a raw file holds no figure on a page)."""
    return {f.replace(",", "") for f in FIGURE.findall(REFERENCE.sub("", text))}


def tables(page: str) -> list[tuple[int, str | None, list[str]]]:
    """(line of the header, the figures comment above it or None, the body's rows) of each table on a page."""
    with open(os.path.join(ROOT, page), encoding="utf-8") as f:
        lines = f.read().split("\n")
    out, i, in_code = [], 0, False
    while i < len(lines):
        if lines[i].startswith("```"):
            in_code = not in_code
        if (lines[i].startswith("|") and i + 1 < len(lines) and re.match(r"^\|\s*:?-", lines[i + 1])):
            j = i + 2
            while j < len(lines) and lines[j].startswith("|"):
                j += 1
            above = [MARK.search(x) for x in lines[max(0, i - 5):i]]
            marks = [m.group(1) for m in above if m]
            out.append((i + 1, marks[-1] if marks else None, lines[i + 2:j]))
            i = j
        else:
            i += 1
    return out


REGION = re.compile(r"<!--\s*figures below:\s*(.*?)\s*-->(.*?)<!--\s*end figures\s*-->", re.S)
DATE = re.compile(r"\d{4}-\d{2}-\d{2}|`[^`\n]*`")  # dates, and code spans (commands and names, not figures)


def regions(page: str) -> list[tuple[str, str]]:
    """(sources, prose) of each held region of a page."""
    with open(os.path.join(ROOT, page), encoding="utf-8") as f:
        return [(m.group(1), DATE.sub("", m.group(2))) for m in REGION.finditer(f.read())]


def _raw(sources: list[str]) -> set[str]:
    raw: set[str] = set()
    for s in sources:
        paths = sorted(glob.glob(os.path.join(ROOT, s), recursive=True))
        assert paths, f"{s} names no committed file"
        for p in paths:
            with open(p, encoding="utf-8", errors="replace") as f:
                raw |= figures(f.read())
    return raw


def _measured(rows: list[str]) -> set[str]:
    return set().union(*(figures(r) for r in rows)) if rows else set()


CASES = [(page, line, mark, rows) for page in PAGES for line, mark, rows in tables(page)
         if len(_measured(rows)) >= MIN_FIGURES]


@pytest.mark.parametrize("page,line,mark,rows", CASES, ids=[f"{c[0]}:{c[1]}" for c in CASES])
def test_every_table_of_figures_is_its_raw_files(page, line, mark, rows):
    assert mark, f"{page}:{line}: a table of figures with no '<!-- figures: ... -->' naming its raw file"
    sources = mark.split()
    held = [s for s in sources if "::" in s]
    for s in held:
        path, name = s.split("::")
        with open(os.path.join(ROOT, path), encoding="utf-8") as f:
            assert re.search(rf"^def {re.escape(name)}\(", f.read(), re.M), f"{page}:{line}: no test {s}"
    if held:
        return
    missing = sorted(_measured(rows) - _raw(sources))  # _raw fails on a source that names no committed file
    assert not missing, f"{page}:{line}: figures not in {sources}: {missing[:20]}"


PROSE = [(page, src, text) for page in PAGES for src, text in regions(page)]


@pytest.mark.parametrize("page,sources,text", PROSE, ids=[f"{c[0]}:{i}" for i, c in enumerate(PROSE)])
def test_every_held_paragraph_is_its_raw_files(page, sources, text):
    missing = sorted(figures(text) - _raw(sources.split()))
    assert not missing, f"{page}: prose figures not in {sources}: {missing[:20]}"


def test_the_checker_finds_a_figure_that_drifts(tmp_path):
    """The check can fail: a figure changed by one digit is reported."""
    assert figures("| a | 1,228 | 46.45 ms | -11.5 % | 7 |") == {"1228", "46.45", "11.5"}
    assert figures("after decision 114, decisions 83 and 112, Decisions 94-103, issue #50: 61.6 s") == {"61.6"}
    page = ["| graph | ms |", "| --- | ---: |", "| a | 46.45 |", "| b | 47.10 |", "| c | 12.5 |", "| d | 13.25 |"]
    raw = figures("46.45 47.10 12.5 13.25")
    assert _measured(page[2:]) <= raw
    drifted = [r.replace("47.10", "47.11") for r in page[2:]]
    assert _measured(drifted) - raw == {"47.11"}
