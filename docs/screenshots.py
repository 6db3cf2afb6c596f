"""Take the README's panel images in headless chromium, from notebooks run in JupyterLab at
their defaults (the reference fit, every parameter as committed): docs/images/lesson_*.png
(notebook 05's lesson panels) and docs/images/search_panel.png (notebook 03's search panel).

Run from the checkout, with the team's reference measurements beside it (../shared or
$SRIFTY_SHARED): ``.venv/bin/python docs/screenshots.py [search] [lessons] [--out DIR]``
(no name: both).
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # tests.builders: the browser tests' JupyterLab and chromium

from tests.builders import browser_page, jupyter_lab, run_notebook_in_lab  # noqa: E402

# name -> (notebook, a selector on the page once it has run, {panel class: image name})
SHOTS = {
    "search": (
        "03_search_ec2.ipynb",
        ".srifty-table table.srifty-ranked tbody tr",
        {"srifty-search-panel": "search_panel.png"},
    ),
    "lessons": (
        "05_tradeoffs.ipynb",
        ".srifty-lesson-variance .srifty-answer",
        {
            "srifty-lesson-scaling": "lesson_scaling.png",
            "srifty-lesson-spot": "lesson_spot.png",
            "srifty-lesson-controller": "lesson_controller.png",
            "srifty-lesson-variance": "lesson_variance.png",
        },
    ),
}


def shoot(name: str, out: Path) -> list[Path]:
    """Run the notebook of ``SHOTS[name]`` at its defaults in JupyterLab and write one image
    per panel under ``out``.

    Args:
        name: a key of ``SHOTS``.
        out: the folder the images go to (made if missing).

    Returns:
        The images written.
    """
    notebook, ready, panels = SHOTS[name]
    out.mkdir(parents=True, exist_ok=True)
    written = []
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        shutil.copyfile(REPO / "notebooks" / notebook, root / notebook)
        with jupyter_lab(root) as lab, browser_page() as page:
            run_notebook_in_lab(page, lab, notebook, ready)
            # bqplot draws on the next animation frames: let every figure settle
            page.wait_for_timeout(3000)
            for panel, image in panels.items():
                element = page.locator(f".{panel}")
                element.scroll_into_view_if_needed()
                page.wait_for_timeout(500)
                element.screenshot(path=str(out / image))
                written.append(out / image)
    return written


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("names", nargs="*", help=f"which images: {', '.join(SHOTS)} (all)")
    parser.add_argument("--out", type=Path, default=REPO / "docs" / "images")
    args = parser.parse_args()
    if unknown := sorted(set(args.names) - set(SHOTS)):
        parser.error(f"unknown {', '.join(unknown)}; give {' or '.join(SHOTS)}")
    for name in args.names or SHOTS:
        for path in shoot(name, args.out):
            print(path)
