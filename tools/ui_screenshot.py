"""The runs table as a user sees it at 1,400 px: ``distrepro ui`` on a store, one paper's address in headless
Chromium, MLflow's Assistant panel closed (as a user closes it once), saved as a small PNG (docs/reference.md).

    python tools/ui_screenshot.py docs/mlflow-runs-table.png [--paper cadp] [--store URI] [--width 1400]

Needs Chromium (``chromium`` on the PATH, or ``--chromium PATH``) and the test support's DevTools helper
(tests/_support/headless_page.py).
"""

from __future__ import annotations

import argparse
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "_support"))

from headless_page import HeadlessPage  # noqa: E402  (on the path just added)

CLOSE_ASSISTANT = """(() => {
  const close = document.querySelector('[data-assistant-ui] button[aria-label="Close"]');
  if (close) close.click();
  return !document.querySelector('[data-assistant-ui] button[aria-label="Close"]');
})()"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _addresses(proc: subprocess.Popen[str]) -> dict[str, str]:
    """The addresses ``distrepro ui`` printed, by label, once it has printed them all."""
    lines: list[str] = []
    while not any("Assistant panel" in line for line in lines):
        line = proc.stdout.readline()  # type: ignore[union-attr]
        if not line:
            sys.exit(f"distrepro ui stopped: {''.join(lines)}{proc.stderr.read()}")  # type: ignore[union-attr]
        lines.append(line)
    return dict(re.findall(r"^  (.+?): (http://\S+)$", "".join(lines), flags=re.M))


def shoot(url: str, out: Path, chromium: str, width: int, height: int) -> None:
    with tempfile.TemporaryDirectory() as work, HeadlessPage(chromium, Path(work), width, height) as page:
        page.goto(url)
        page.wait_for("document.querySelectorAll('.ag-row').length > 0", 120)
        page.wait_for(CLOSE_ASSISTANT, 30)
        time.sleep(2)  # the table lays its columns out again once the panel has gone
        page.screenshot(out)
    from PIL import Image  # matplotlib's dependency: 64 colours keep the screenshot small and its text sharp

    Image.open(out).convert("RGB").quantize(64).save(out, optimize=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--paper", help="the paper whose runs table to show (default: the first in the store)")
    parser.add_argument("--store", help="the tracking store (default: the one distrepro uses)")
    parser.add_argument("--width", type=int, default=1400)
    parser.add_argument("--height", type=int, default=900)
    parser.add_argument("--chromium", default=shutil.which("chromium") or shutil.which("google-chrome"))
    args = parser.parse_args()
    if not args.chromium:
        parser.error("no chromium on the PATH: --chromium PATH")
    command = [sys.executable, "-m", "distrepro.cli", "ui", "--port", str(_free_port())]
    command += ["--store", args.store] if args.store else []
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        found = _addresses(proc)
        label = f"distrepro/{args.paper}" if args.paper else next(iter(found), None)
        if label not in found:
            sys.exit(f"no runs table for {label} in the store; it has: {', '.join(found) or 'none'}")
        shoot(found[label], args.out, args.chromium, args.width, args.height)
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=120)
    print(f"{args.out}: {found[label]} at {args.width} x {args.height}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
