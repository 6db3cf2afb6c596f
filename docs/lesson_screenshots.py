"""Take docs/images/lesson_*.png: notebook 05 at its defaults (the reference fit, every
parameter as committed) run in JupyterLab, each lesson panel shot in headless chromium.

Run from the checkout, with the team's reference measurements beside it (../shared or
$SRIFTY_SHARED): ``.venv/bin/python docs/lesson_screenshots.py [OUT_DIR]``.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # tests.builders: the browser tests' JupyterLab and chromium

from tests.builders import browser_page, jupyter_lab, run_notebook_in_lab  # noqa: E402

# panel class -> image name
PANELS = {
    "srifty-lesson-scaling": "lesson_scaling.png",
    "srifty-lesson-spot": "lesson_spot.png",
    "srifty-lesson-controller": "lesson_controller.png",
    "srifty-lesson-variance": "lesson_variance.png",
}


def main(out: Path) -> None:
    """Run notebook 05 at its defaults in JupyterLab and write one image per lesson."""
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        shutil.copyfile(REPO / "notebooks" / "05_tradeoffs.ipynb", root / "05.ipynb")
        with jupyter_lab(root) as lab, browser_page() as page:
            run_notebook_in_lab(page, lab, "05.ipynb", ".srifty-lesson-variance .srifty-answer")
            # bqplot draws on the next animation frames: let every figure settle
            page.wait_for_timeout(3000)
            for panel, name in PANELS.items():
                element = page.locator(f".{panel}")
                element.scroll_into_view_if_needed()
                page.wait_for_timeout(500)
                element.screenshot(path=str(out / name))
                print(out / name)


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else REPO / "docs" / "images")
