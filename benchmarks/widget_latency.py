"""Widget latency in a real browser: a control change to the re-rendered table and figure.

Ours: ``SearchPanel`` (srifty_kit.present.widgets) — every candidate evaluated once, a deadline
move only re-filters and re-ranks those arrays (``planner.select``), the bqplot figure's marks
get new data in place. Naive: the same deadline slider wired the obvious way — ``search()``
from scratch and a matplotlib figure redrawn into an Output widget on every change (the
static notebook's figure, ``plots.cost_time_front``), and the same HTML table. Empty: the
floor of this machine at this moment, the issue's "empty ipywidgets round trip" — the same
slider rewriting two HTML widgets (an image, a one-row table) with no work behind them.

All three run in the same JupyterLab (127.0.0.1, a token), in the same kernel, in the same headless
Debian chromium (Playwright), on the demo model (``mlp`` from the packaged profiles that
``srifty demo`` makes, fitted here) over the full embedded catalog, on-demand and spot. One
change is one ArrowLeft/ArrowRight keydown on the deadline slider's handle; it is timed in the
page (``performance.now()``) from just before the keydown until the table carries the new
deadline and the figure has changed (the bqplot deadline shade, the last mark the panel
updates; the naive and empty panels' new image decoded), plus one animation frame for the paint.
``CHANGES`` changes per panel after ``WARMUP`` untimed ones, moving left then right.

Beside it, the kernel's share: the same change handled in this process without a browser;
and, in the kernel alone, a control that re-evaluates every candidate (``reevaluate_latencies``).

    .venv/bin/python benchmarks/widget_latency.py

Writes reports/benchmarks/widget_latency.md; prints both panels' median and p90. Timings on a
shared 2-core machine are noisy.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import tempfile
import time
import warnings
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # tests.builders: the JupyterLab and chromium helpers

from common import markdown_table, write_report  # noqa: E402

from srifty_kit.decide.job import Constraints, Job  # noqa: E402
from srifty_kit.present.widgets import STYLE, SearchPanel, log_choices, ranked_html, tag  # noqa: E402

CHANGES = 40
WARMUP = 4
REEVALUATE = 20  # max-nodes moves timed in the kernel (each re-evaluates every candidate)
DEADLINE_H = 1.0


def demo_model():
    """The demo's model and job: mlp profiled here (the packaged sample), full catalog."""
    from srifty_kit.model.estimator import StepTimeModel
    from srifty_kit.tables.reference import packaged

    measured = pd.concat(
        [
            pd.read_csv(packaged("sample_profile_single.csv")),
            pd.read_csv(packaged("sample_profile_dist.csv")),
        ],
        ignore_index=True,
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = StepTimeModel().fit(measured)
    facts = json.loads(Path(packaged("sample_profile_facts.json")).read_text())
    job = Job("mlp", samples=1e9, reference_bsz=64, noise_scale=facts["mlp"]["noise_scale"])
    return model, job, Constraints(deadline_h=DEADLINE_H, spot=True)


class NaivePanel:
    """The same deadline slider and table, wired without the design: ``search()`` from scratch
    and a matplotlib figure redrawn into an Output widget on every change."""

    def __init__(self, model, catalog, job: Job, constraints: Constraints) -> None:
        import ipywidgets as w

        self.model, self.catalog, self.job, self.constraints = model, catalog, job, constraints
        self.deadline = tag(
            w.SelectionSlider(
                options=log_choices(constraints.deadline_h, 0.01, 1000.0),
                value=constraints.deadline_h,
                description="hours",
            ),
            "srifty-deadline",
        )
        self.figure = tag(w.Output(), "srifty-figure")
        self.table = tag(w.HTML(), "srifty-table")
        self.deadline.observe(lambda _change: self.refresh(), names="value")
        self.widget = tag(
            w.VBox([w.HTML(STYLE), self.deadline, self.figure, self.table]), "srifty-naive-panel"
        )
        self.refresh()

    def refresh(self) -> None:
        """Search again, redraw the figure, rewrite the table."""
        import matplotlib.pyplot as plt
        from IPython.display import display

        from srifty_kit.decide.planner import search
        from srifty_kit.present.plots import cost_time_front

        constraints = replace(self.constraints, deadline_h=float(self.deadline.value))
        result = search(self.model, self.catalog, self.job, constraints)
        with self.figure:
            self.figure.clear_output(wait=True)
            fig, ax = plt.subplots(figsize=(8, 5))
            cost_time_front(
                result.sample(2000),
                result.pareto,
                result.knee,
                result.pick,
                deadline_h=constraints.deadline_h,
                ax=ax,
            )
            display(fig)
            plt.close(fig)
        self.table.value = ranked_html(result, {"deadline": constraints.deadline_h})

    def _repr_mimebundle_(self, **kwargs):
        return self.widget._repr_mimebundle_(**kwargs)


# a 1x1 GIF: the empty panel's "figure" is this image, its URL fragment the deadline
PIXEL = "data:image/gif;base64,R0lGODlhAQABAIAAAP///wAAACH5BAEAAAAALAAAAAABAAEAAAICRAEAOw=="


class EmptyPanel:
    """The floor: the same slider wired to two HTML widgets the kernel rewrites at once (an
    image for the figure, a one-row table carrying the deadline), with no search and no
    figure behind them: an ipywidgets round trip through this JupyterLab and browser."""

    def __init__(self, model, catalog, job: Job, constraints: Constraints) -> None:
        import ipywidgets as w

        self.deadline = tag(
            w.SelectionSlider(
                options=log_choices(constraints.deadline_h, 0.01, 1000.0),
                value=constraints.deadline_h,
                description="hours",
            ),
            "srifty-deadline",
        )
        self.figure = tag(w.HTML(), "srifty-figure")
        self.table = tag(w.HTML(), "srifty-table")
        self.deadline.observe(lambda _change: self.refresh(), names="value")
        self.widget = tag(w.VBox([self.deadline, self.figure, self.table]), "srifty-empty-panel")
        self.refresh()

    def refresh(self) -> None:
        """Show the deadline in the image's URL and the table's data attribute."""
        d = float(self.deadline.value)
        self.figure.value = f'<img src="{PIXEL}#{d!r}" width="1" height="1">'
        self.table.value = f'<table class="srifty-ranked" data-deadline="{d!r}"></table>'

    def _repr_mimebundle_(self, **kwargs):
        return self.widget._repr_mimebundle_(**kwargs)


NOTEBOOK_SETUP = f"""
import sys, warnings
sys.path.insert(0, {str(HERE)!r})
warnings.simplefilter("ignore")
import matplotlib
matplotlib.use("module://matplotlib_inline.backend_inline")
from widget_latency import EmptyPanel, NaivePanel, demo_model
from srifty_kit.catalog.query import load_catalog
from srifty_kit.present.widgets import SearchPanel
model, job, constraints = demo_model()
catalog = load_catalog()
"""

# one change: keydown on the deadline handle, until table and figure show it, plus a frame
CHANGE_JS = """
async ([root, key]) => {
  const panel = document.querySelector(root);
  const handle = panel.querySelector('.srifty-deadline .noUi-handle');
  const figure = panel.querySelector('.srifty-figure');
  const table = () => panel.querySelector('.srifty-table table.srifty-ranked');
  const figureState = () => {
    const marks = figure.querySelector('svg.svg-figure > g > g');
    if (marks) {  // bqplot: the deadline shade is the last mark the panel updates
      const line = marks.children[%(deadline_mark)d].querySelector('path.line');
      return line ? line.getAttribute('d') : '';
    }
    const img = figure.querySelector('img');
    return img && img.complete && img.naturalWidth > 0 ? img.src : '';
  };
  const deadline0 = table().dataset.deadline;
  const figure0 = figureState();
  return await new Promise((resolve, reject) => {
    let t0 = 0;
    let first = null;  // the first change the kernel's answer makes (not the slider's own)
    const done = () => {
      const t = table();
      const f = figureState();
      if (t && t.dataset.deadline !== deadline0 && f && f !== figure0) {
        const dom = performance.now() - t0;
        observer.disconnect();
        panel.removeEventListener('load', check, true);
        requestAnimationFrame(() => resolve({
          first_ms: first, dom_ms: dom, paint_ms: performance.now() - t0,
          deadline: t.dataset.deadline}));
      }
    };
    const check = (mutations) => {
      if (first === null && Array.isArray(mutations) && mutations.some(
          (m) => !(m.target.closest ? m.target : m.target.parentElement)
                   .closest('.srifty-deadline'))) {
        first = performance.now() - t0;
      }
      done();
    };
    const observer = new MutationObserver(check);
    observer.observe(panel, {subtree: true, childList: true, attributes: true,
                             characterData: true});
    panel.addEventListener('load', check, true);  // an <img> finished loading
    setTimeout(() => reject(new Error('no update within 30 s')), 30000);
    t0 = performance.now();
    handle.dispatchEvent(new KeyboardEvent('keydown', {key: key, bubbles: true}));
  });
}
"""


def browser_latencies() -> dict[str, list[dict]]:
    """Each timed change per panel (first_ms: the kernel's first update on the page; paint_ms:
    table and figure re-rendered and painted), in one JupyterLab and chromium."""
    import nbformat

    from srifty_kit.present.widgets import MARKS
    from tests.builders import browser_page, jupyter_lab, run_notebook_in_lab

    js = CHANGE_JS % {"deadline_mark": MARKS.index("deadline")}
    keys = ["ArrowLeft"] * ((CHANGES + WARMUP) // 2)
    keys += ["ArrowRight"] * (CHANGES + WARMUP - len(keys))
    out: dict[str, list[dict]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        nb = nbformat.v4.new_notebook()
        nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3"}
        nb.cells = [
            nbformat.v4.new_code_cell(NOTEBOOK_SETUP),
            nbformat.v4.new_code_cell("SearchPanel(model, catalog, job, constraints)"),
            nbformat.v4.new_code_cell("NaivePanel(model, catalog, job, constraints)"),
            nbformat.v4.new_code_cell("EmptyPanel(model, catalog, job, constraints)"),
        ]
        nbformat.write(nb, root / "latency.ipynb")
        with jupyter_lab(root) as lab, browser_page() as page:
            run_notebook_in_lab(page, lab, "latency.ipynb", ".srifty-naive-panel img")
            panels = {
                "ours": ".srifty-search-panel",
                "naive": ".srifty-naive-panel",
                "empty": ".srifty-empty-panel",
            }
            for name, panel in panels.items():
                page.locator(f"{panel} .srifty-deadline .noUi-handle").scroll_into_view_if_needed()
                times = []
                for i, key in enumerate(keys):
                    change = page.evaluate(js, [panel, key])
                    readout = page.locator(f"{panel} .srifty-deadline .widget-readout")
                    if float(change["deadline"]) != float(readout.inner_text()):
                        raise RuntimeError(f"{name}: the table shows another deadline than set")
                    if i >= WARMUP:
                        times.append(change)
                    page.wait_for_timeout(150)  # let the kernel go idle between changes
                out[name] = times
    return out


def kernel_latencies() -> dict[str, list[float]]:
    """The same changes handled in this process (no browser, no comm): the kernel's share."""
    from srifty_kit.catalog.query import load_catalog

    model, job, constraints = demo_model()
    catalog = load_catalog()
    out = {}
    for name, make in (("ours", SearchPanel), ("naive", NaivePanel), ("empty", EmptyPanel)):
        import matplotlib

        matplotlib.use("Agg")
        panel = make(model, catalog, job, constraints)
        slider = panel.controls["deadline"] if name == "ours" else panel.deadline
        stops = [v for _, v in slider.options]
        start = stops.index(constraints.deadline_h)
        path = stops[start - CHANGES // 2 : start][::-1] + stops[start - CHANGES // 2 : start]
        times = []
        for value in path:
            t = time.perf_counter()
            slider.value = value
            times.append((time.perf_counter() - t) * 1000)
        out[name] = times
    return out


def reevaluate_latencies() -> dict[str, list[float]]:
    """Kernel alone: ``REEVALUATE`` moves of the max-nodes slider up one stop beyond the nodes
    evaluated so far, each re-evaluating every candidate (``planner.evaluate``); as the panel
    runs it, and with what it keeps across changes dropped before each one (the carries to
    types never measured and the catalog's check: the panel before stop 46, but for the
    faster catalog lookup)."""
    from srifty_kit.catalog.query import load_catalog
    from srifty_kit.tables import contracts

    out = {}
    for name, forget in (("kept", False), ("dropped", True)):
        model, job, constraints = demo_model()
        panel = SearchPanel(model, load_catalog(), job, constraints)
        slider = panel.controls["max_nodes"]
        times = []
        for value in range(slider.value + 1, slider.value + 1 + REEVALUATE):
            if forget:
                model.__dict__.pop("_transfers", None)
                contracts._LAST_CATALOG.clear()
            t = time.perf_counter()
            slider.value = value
            times.append((time.perf_counter() - t) * 1000)
        out[name] = times
    return out


def _p90(x: list[float]) -> float:
    return float(np.percentile(x, 90))


def _paint(changes: list[dict]) -> list[float]:
    return [c["paint_ms"] for c in changes]


def _row(name: str, browser: list[dict], kernel: list[float], ours: list[dict]) -> dict:
    paint, base = _paint(browser), _paint(ours)
    first = [c["first_ms"] for c in browser if c["first_ms"] is not None]
    median = statistics.median
    return {
        "contender": name,
        "changes": str(len(paint)),
        "median ms": f"{median(paint):.1f}",
        "p90 ms": f"{_p90(paint):.1f}",
        "max ms": f"{max(paint):.1f}",
        "ratio to ours (median / p90)": f"{median(paint) / median(base):.1f} / "
        f"{_p90(paint) / _p90(base):.1f}",
        "first update on the page: median ms": f"{median(first):.1f}",
        "kernel alone: median / p90 ms": f"{median(kernel):.1f} / {_p90(kernel):.1f}",
    }


def main() -> None:
    """Measure both panels in the browser and in the kernel; print and write the report."""
    from srifty_kit.catalog.query import load_catalog
    from srifty_kit.decide.planner import evaluate

    model, job, constraints = demo_model()
    n = len(evaluate(model, load_catalog(), job, constraints))
    load_before = os.getloadavg()[0]
    browser = browser_latencies()
    kernel = kernel_latencies()
    again = reevaluate_latencies()
    load_after = os.getloadavg()[0]
    names = {
        "ours": "ours (SearchPanel: select + bqplot in place)",
        "naive": "naive (search() + matplotlib redraw)",
        "empty": "empty round trip (the same slider, two HTML widgets, no work)",
    }
    table = pd.DataFrame([_row(names[k], browser[k], kernel[k], browser["ours"]) for k in names])
    print(table.to_string(index=False))
    ours, naive, empty = (_paint(browser[k]) for k in ("ours", "naive", "empty"))
    p90 = _p90(ours)
    verdict = (
        f"met ({p90:.1f} ms at the 90th percentile)"
        if p90 <= 100
        else f"missed ({p90:.1f} ms at the 90th percentile)"
    )
    first = statistics.median(c["first_ms"] for c in browser["ours"] if c["first_ms"] is not None)
    where = (
        f"Where ours spends its median {statistics.median(ours):.0f} ms: {first:.0f} ms pass "
        "before the kernel's first update reaches the page (keydown, the slider's message "
        "through the Jupyter server, the kernel's own work — "
        f"{statistics.median(kernel['ours']):.0f} ms measured alone — and the updates back), "
        f"the remaining {statistics.median(ours) - first:.0f} ms the browser applying the "
        "figure's marks, the table and the explanation and painting them. The kernel, the "
        "Jupyter server and Chromium share the machine's cores with each other and with "
        "whatever else runs; the tail above the median is that contention. The empty round "
        f"trip, in the same run, takes {statistics.median(empty):.0f} / {_p90(empty):.0f} ms "
        "(median / p90): ours is "
        f"{statistics.median(ours) - statistics.median(empty):.0f} ms above it at the median "
        f"and {p90 - _p90(empty):.0f} ms at the 90th percentile; the rest is this machine's "
        "floor for any widget change."
    )
    text = "\n".join(
        [
            "# Widget latency (benchmarks/widget_latency.py)",
            "",
            __doc__.split("\n\n    .venv")[0].strip(),
            "",
            markdown_table(table),
            "",
            f"Candidates behind each change: {n:,} (demo model `mlp`, full us-east-1 catalog, "
            f"on-demand and spot, deadline moved around {DEADLINE_H:g} h one slider stop at a "
            "time). Browser: headless Debian chromium "
            f"{_chromium_version()}; JupyterLab and the kernel on the same machine "
            f"({os.cpu_count()} cores, shared with other jobs while measured: load average "
            f"{load_before:.1f} before, {load_after:.1f} after).",
            f"Goal: a widget change re-renders within 100 ms at the 90th percentile: {verdict}.",
            "",
            where,
            "",
            "A control that re-evaluates every candidate, in the kernel alone (no browser): "
            f"{REEVALUATE} moves of the max-nodes slider, one stop up at a time beyond the nodes "
            "evaluated so far. As the panel runs it (the carries to types never measured and "
            "the catalog's check kept across changes while the catalog holds the same): "
            f"{statistics.median(again['kept']):.0f} / {_p90(again['kept']):.0f} ms (median / "
            "p90); with those dropped before each change: "
            f"{statistics.median(again['dropped']):.0f} / {_p90(again['dropped']):.0f} ms. The "
            "browser's share on top of the kernel's is the deadline move's above (about "
            f"{statistics.median(ours) - statistics.median(kernel['ours']):.0f} ms at the "
            "median); these moves are not timed in the browser.",
            "",
        ]
    )
    write_report("widget_latency", text)
    print(f"ours: median {statistics.median(ours):.1f} ms, p90 {p90:.1f} ms")
    print(f"naive: median {statistics.median(naive):.1f} ms, p90 {_p90(naive):.1f} ms")
    print(f"empty: median {statistics.median(empty):.1f} ms, p90 {_p90(empty):.1f} ms")


def _chromium_version() -> str:
    import subprocess

    from tests.builders import chromium_path

    done = subprocess.run([chromium_path(), "--version"], capture_output=True, text=True)
    return done.stdout.split("\n")[0].replace("Chromium ", "").split(" ")[0]


if __name__ == "__main__":
    main()
