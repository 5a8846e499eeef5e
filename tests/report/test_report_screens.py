"""Screenshot tests of the report in headless Chromium: what a laptop's first screen holds, and the figures load.

The report is built from the hand-made runs of ``test_report`` (no MLflow). A copy of report.html gets a probe
script that measures, after layout, where the headline tally, the table of contents and the caveat on measured
versus emulated quantities sit, and whether every ``<img>`` decoded; Chromium's ``--dump-dom`` returns the
probe's answer. Asserting on the layout the browser computed (not on pixels) says what failed in words.
Skipped where Chromium is absent (CI installs it).
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
from hang_guard import hang_guard
from test_report import CHROMIUM, SYNTH_CLAIMS, synthetic_runset

from distrepro.claims.papers import PaperInfo
from distrepro.claims.schema import validate_paper
from distrepro.report.build import write_report

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(CHROMIUM is None, reason="chromium not installed (apt-get install -y chromium)"),
]

#: a laptop's screen: the most common desktop resolution in StatCounter's worldwide figures for years
WIDTH, HEIGHT = 1366, 768

#: text the first screen must show, as the report writes it
FIRST_SCREEN = {
    "tally": "Of the paper's 3 headline claims",
    "contents": "Contents:",
    "caveat": "What these verdicts rest on.",
}

_PROBE = """<script>
window.addEventListener("load", () => {
  const where = (needle) => {
    const walk = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
    for (let node = walk.nextNode(); node; node = walk.nextNode()) {
      if (!node.textContent.includes(needle)) continue;
      const range = document.createRange();
      range.selectNodeContents(node);
      const box = range.getBoundingClientRect();
      return {top: box.top, bottom: box.bottom, visible: box.height > 0};
    }
    return null;
  };
  const found = {};
  for (const [key, needle] of Object.entries(NEEDLES)) found[key] = where(needle);
  const images = [...document.images].map((img) => ({complete: img.complete, width: img.naturalWidth}));
  const out = document.createElement("pre");
  out.id = "probe";
  out.textContent = JSON.stringify({height: window.innerHeight, width: window.innerWidth, found, images});
  document.body.appendChild(out);
});
</script>"""


def _probe(html: Path, workdir: Path) -> dict[str, Any]:
    """Open a probed copy of ``html`` at :data:`WIDTH` × :data:`HEIGHT`; the probe's measurements."""
    page = workdir / "probed.html"
    script = _PROBE.replace("NEEDLES", json.dumps(FIRST_SCREEN))
    page.write_text(html.read_text().replace("</body>", script + "</body>"))
    proc = subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
         f"--user-data-dir={workdir / 'profile'}", f"--window-size={WIDTH},{HEIGHT}", "--virtual-time-budget=10000",
         "--dump-dom", page.as_uri()],
        capture_output=True, text=True, timeout=hang_guard(120), check=False,
    )  # fmt: skip
    found = re.search(r'<pre id="probe">(.*?)</pre>', proc.stdout, re.S)
    assert found, f"the probe did not run: {proc.stderr[-1500:]}"
    return json.loads(found.group(1).replace("&quot;", '"').replace("&amp;", "&"))


@pytest.fixture(scope="module")
def probed(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    out = tmp_path_factory.mktemp("screens")
    report = write_report(PaperInfo("synth", validate_paper(SYNTH_CLAIMS)), synthetic_runset(), out / "synth")
    return _probe(report.html, out)


def test_first_screen_holds_the_tally_the_contents_and_the_caveat(probed: dict[str, Any]) -> None:
    fold = probed["height"]  # the page's viewport: the window less what headless Chromium keeps for its own frame
    assert probed["width"] == WIDTH and 0.75 * HEIGHT <= fold <= HEIGHT
    for key, box in probed["found"].items():
        assert box is not None and box["visible"], f"{key}: {FIRST_SCREEN[key]!r} is not in the page"
        assert box["bottom"] <= fold, f"{key}: {FIRST_SCREEN[key]!r} starts {box['top']:.0f} px down, below the fold"


def test_every_figure_loads(probed: dict[str, Any]) -> None:
    images = probed["images"]
    assert len(images) >= 5  # the synthetic report draws every figure kind it has data for
    assert all(img["complete"] and img["width"] > 0 for img in images), images
