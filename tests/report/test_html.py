"""The report's HTML: a table of contents whose links land on anchored headings (distrepro/report/html.py)."""

from __future__ import annotations

import re
from pathlib import Path

from distrepro.report.html import contents, render_html, slug


def test_contents_links_land_on_anchored_headings(tmp_path: Path) -> None:
    md = "# Title\n\n## Claims\n\ntext\n\n### Claim details\n\n## Known deviations & more\n\nx\n"
    toc = contents(md)
    assert toc == "**Contents:** [Claims](#claims) · [Known deviations & more](#known-deviations--more)"
    page = render_html(md.replace("# Title\n", "# Title\n\n" + toc + "\n"), tmp_path, "t")
    targets = re.findall(r'href="#([^"]+)"', page)
    ids = set(re.findall(r'<h[23] id="([^"]+)"', page))
    assert targets and set(targets) <= ids and "claim-details" in ids


def test_slug_keeps_words_and_drops_punctuation() -> None:
    assert slug("Speedup vs the baseline (×)") == "speedup-vs-the-baseline-"
    assert slug("Verdicts by scale") == "verdicts-by-scale"


def test_the_first_screen_says_what_was_emulated() -> None:
    import pandas as pd

    from distrepro.report.sections import caveats

    runs = pd.DataFrame({"profile": ["a40-25gbe-16", "a40-25gbe-16"], "tags.time.charged_workload": ["resnet18"] * 2})
    text = caveats(runs)
    assert "*emulated* on the hardware profile(s) `a40-25gbe-16`" in text and "charged as resnet18" in text
    assert "zero-width interval" in text and "(#environment)" in text
