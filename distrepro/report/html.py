"""Markdown → one self-contained HTML file (figures inlined as base64 PNG, CSS inline, no scripts).

The Markdown report is the source of truth; the HTML is rendered from it with markdown-it (a
dependency of rich, already installed) so the two can never disagree. Raw HTML in the Markdown is
escaped (``html: False``): claim statements and README text come from YAML and Markdown files and
must not be able to inject markup. The file loads nothing from the network, so it can be mailed,
attached to an MLflow run, or opened offline.
"""

from __future__ import annotations

import base64
import html
import re
from pathlib import Path

from markdown_it import MarkdownIt

CSS = """
body { font-family: -apple-system, "Segoe UI", Roboto, Helvetica, Arial, sans-serif; margin: 2rem auto;
       max-width: 1200px; padding: 0 1rem; color: #1d1d1f; line-height: 1.45; }
h1 { border-bottom: 2px solid #ddd; padding-bottom: .3rem; }
h2 { border-bottom: 1px solid #eee; padding-bottom: .2rem; margin-top: 2.2rem; }
table { border-collapse: collapse; margin: .8rem 0; font-size: .86rem; display: block; overflow-x: auto; }
th, td { border: 1px solid #d0d7de; padding: .3rem .55rem; vertical-align: top; text-align: left; }
th { background: #f6f8fa; }
tr:nth-child(even) td { background: #fbfbfc; }
td.verdict { font-weight: 700; white-space: nowrap; }
td.pass { color: #1b5e20; background: #e8f5e9 !important; }
td.fail { color: #b71c1c; background: #ffebee !important; }
td.inconclusive { color: #7a5900; background: #fff8e1 !important; }
img { max-width: 100%; height: auto; border: 1px solid #eee; margin: .4rem 0; }
code { background: #f6f8fa; padding: 0 .2rem; border-radius: 3px; font-size: .9em; }
strong.badge { padding: .05rem .4rem; border-radius: 3px; }
strong.pass { color: #1b5e20; background: #e8f5e9; }
strong.fail { color: #b71c1c; background: #ffebee; }
strong.inconclusive { color: #7a5900; background: #fff8e1; }
details { margin: .6rem 0; color: #444; }
summary { cursor: pointer; }
blockquote { border-left: 4px solid #ddd; margin: .5rem 0; padding: .1rem 1rem; color: #555; }
"""

_IMG = re.compile(r'<img src="([^"]+)"')
# the fold markers of distrepro.report.headline.folded, as markdown-it escapes them (raw HTML is off): only a
# paragraph that is exactly a marker becomes the element, so text from YAML or a README cannot add markup
_DETAILS_OPEN = re.compile(r"<p>&lt;details&gt;&lt;summary&gt;(.*?)&lt;/summary&gt;</p>")
_DETAILS_CLOSE = re.compile(r"<p>&lt;/details&gt;</p>")
_HEADLINE_VERDICT = re.compile(r"<li><strong>(PASS|FAIL|INCONCLUSIVE)</strong>")
_VERDICT_CELL = re.compile(r'<td(?: style="[^"]*")?>(PASS|FAIL|INCONCLUSIVE)</td>')


_H23 = re.compile(r"<h([23])>(.*?)</h\1>")
_TAG = re.compile(r"<[^>]+>")


def slug(heading: str) -> str:
    """The anchor of a heading, as GitHub makes it (lower case, punctuation dropped, spaces to hyphens), so the
    report's contents links work in the HTML file and in a Markdown viewer alike."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def contents(markdown: str) -> str:
    """A one-paragraph table of contents of ``markdown``'s second-level headings (links to their anchors)."""
    heads = [line[3:].strip() for line in markdown.splitlines() if line.startswith("## ")]
    return "**Contents:** " + " · ".join(f"[{h}](#{slug(h)})" for h in heads) if heads else ""


def _anchor(m: re.Match[str]) -> str:
    text = html.unescape(_TAG.sub("", m.group(2)))
    return f'<h{m.group(1)} id="{html.escape(slug(text))}">{m.group(2)}</h{m.group(1)}>'


def _inline_images(body: str, base: Path) -> str:
    def repl(m: re.Match[str]) -> str:
        src = m.group(1)
        path = (base / html.unescape(src)).resolve()
        if src.startswith(("data:", "http:", "https:")) or not path.is_file() or path.suffix.lower() != ".png":
            return m.group(0)
        data = base64.b64encode(path.read_bytes()).decode("ascii")
        return f'<img src="data:image/png;base64,{data}"'

    return _IMG.sub(repl, body)


def render_html(markdown: str, base: Path, title: str) -> str:
    """The HTML page for ``markdown``; relative PNG links are resolved against ``base`` and inlined."""
    md = MarkdownIt("commonmark", {"html": False, "typographer": False}).enable("table")
    body = md.render(markdown)
    body = _inline_images(body, base)
    body = _H23.sub(_anchor, body)  # anchors for the table of contents (distrepro.report.html.contents)
    body = _DETAILS_OPEN.sub(r"<details><summary>\1</summary>", body)
    body = _DETAILS_CLOSE.sub("</details>", body)
    body = _HEADLINE_VERDICT.sub(
        lambda m: f'<li><strong class="badge {m.group(1).lower()}">{m.group(1)}</strong>', body
    )
    body = _VERDICT_CELL.sub(lambda m: f'<td class="verdict {m.group(1).lower()}">{m.group(1)}</td>', body)
    return (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f"<title>{html.escape(title)}</title>\n<style>{CSS}</style>\n</head>\n<body>\n{body}</body>\n</html>\n"
    )
