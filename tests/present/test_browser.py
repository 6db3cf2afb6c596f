"""The panels in a real browser: JupyterLab on 127.0.0.1 with a token, headless Debian chromium
driven by Playwright. Moving a control changes the table and the figure to exactly what the
decide layer returns for the same inputs; screenshots go to reports/screenshots/."""

from __future__ import annotations

import json
import re
import shutil

import nbformat
import numpy as np
import pandas as pd
import pytest
from papermill.iorw import load_notebook_node
from papermill.parameterize import parameterize_notebook

from srifty_kit import Constraints, Job, StepTimeModel, load_catalog, search
from srifty_kit.decide import tradeoffs
from srifty_kit.decide.explanation import config_phrase
from srifty_kit.decide.planner import evaluate
from srifty_kit.present.plots import cost_time_axes
from srifty_kit.present.widgets import MARKS
from tests.builders import (
    REPO,
    browser_page,
    jupyter_lab,
    listed_candidates,
    run_notebook_in_lab,
    slider_press,
)

pytestmark = pytest.mark.slow
SCREENSHOTS = REPO / "reports" / "screenshots"
NOTEBOOK_03 = {
    "workload": "resnet",
    "samples": 1.2e8,
    "reference_bsz": 256,
    "noise_scale": 4096.0,
    "local_bsz": [16, 32, 64],
    "deadline_h": 20.0,
    "budget_usd": None,
    "spot": False,
    "hetero": False,
    "max_nodes": 8,
    "interactive": True,
}

# what the figure shows, read from bqplot's SVG: the plot area, and per mark its points
FIGURE_JS = """
(cls) => {
  const fig = document.querySelector('.' + cls);
  const area = fig.querySelector('rect.plotarea_background');
  const marks = fig.querySelector('svg.svg-figure > g > g').children;
  const points = (g) => Array.from(g.querySelectorAll('g.object_grp')).map(
      (p) => p.getAttribute('transform'));
  const line = (g) => {
    const p = g.querySelector('path.line');
    return p ? p.getAttribute('d') : '';
  };
  // each axis' ticks: where each is drawn and what it says
  const ticks = (a) => Array.from(a.querySelectorAll('g.tick')).map(
      (t) => [t.getAttribute('transform'), (t.querySelector('text') || {}).textContent || '']);
  return {
    width: +area.getAttribute('width'), height: +area.getAttribute('height'),
    points: Array.from(marks).map(points), lines: Array.from(marks).map(line),
    title: fig.querySelector('text.mainheading').textContent,
    ticks: Array.from(fig.querySelectorAll('g.axis')).map(ticks),
  };
}
"""
TABLE_JS = """
(cls) => {
  const t = document.querySelector('.' + cls + ' table.srifty-ranked');
  return {
    data: Object.assign({}, t.dataset),
    rows: Array.from(t.querySelectorAll('tbody tr')).map(
        (r) => Array.from(r.querySelectorAll('td')).map((c) => c.textContent)),
  };
}
"""


def _xy(transform: str) -> tuple[float, float]:
    x, y = re.match(r"translate\(([-\d.e]+),\s*([-\d.e]+)\)", transform).groups()
    return float(x), float(y)


@pytest.fixture(scope="module")
def fitted(tmp_path_factory, model_file):
    root = tmp_path_factory.mktemp("lab")
    shutil.copyfile(model_file, root / "model.json")
    return root, StepTimeModel.load(root / "model.json")


@pytest.fixture(scope="module")
def page(fitted):
    if shutil.which("chromium") is None:
        pytest.fail(
            "chromium is not installed: the browser tests need Debian's chromium "
            "(`apt-get install -y chromium`; `make test` installs it)"
        )
    root, _ = fitted
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    with jupyter_lab(root) as lab, browser_page() as page:
        page.lab, page.lab_root = lab, root
        yield page


def _parameterize(fitted, notebook: str, name: str, parameters: dict) -> str:
    root, _ = fitted
    nb = load_notebook_node(str(REPO / "notebooks" / notebook))
    nb = parameterize_notebook(nb, {"model_path": str(root / "model.json"), **parameters})
    nbformat.write(nb, root / name)
    return name


def _expected(data: dict, model, catalog) -> tuple:
    """What search() returns for the inputs the table says it was computed for."""
    job = json.loads(data["job"])
    if job["local_bsz"] is not None:
        job["local_bsz"] = tuple(job["local_bsz"])
    constraints = Constraints(
        deadline_h=float(data["deadline"]) if data["deadline"] else None,
        budget_usd=float(data["budget"]) if data["budget"] else None,
        confidence=float(data["confidence"]),
        max_nodes=int(data["maxNodes"]),
        spot=data["spot"] == "true",
        mixes=data["mixes"] == "true",
    )
    return search(model, catalog, Job(**job), constraints, objective=data["objective"], top=10)


def _log_axis(ticks: list[list[str]]):
    """A log axis' place on the screen for a value, read off its drawn ticks: the line through
    (log value, position) of every labelled tick ('translate(x,0)' across, '(0,y)' up)."""
    drawn = [(_xy(at), float(text.replace(",", ""))) for at, text in ticks if text]
    assert len(drawn) >= 2, ticks  # two ticks at least, to read a scale off
    across = abs(drawn[-1][0][0] - drawn[0][0][0]) > abs(drawn[-1][0][1] - drawn[0][0][1])
    # d3's axis draws its ticks half a pixel off where the device pixel ratio is 1 (for a
    # crisp line), as the headless page's is
    place = np.array([xy[0 if across else 1] for xy, _ in drawn]) - 0.5
    slope, at = np.polyfit(np.log([v for _, v in drawn]), place, 1)
    assert np.allclose(at + slope * np.log([v for _, v in drawn]), place, atol=0.5)  # log
    return lambda v: at + slope * np.log(v)


def _assert_panel_shows(page, result) -> None:
    table = page.evaluate(TABLE_JS, "srifty-table")
    assert int(table["data"]["nFeasible"]) == result.n_feasible
    assert int(table["data"]["nCandidates"]) == result.n_candidates
    want = [
        [str(i), config_phrase(r)]
        + [f"{r['usd_per_hr']:.4g}", f"{r['p_meet']:.0%}"]
        + [f"{r[c]:.4g}" for c in ("time_h", "time_hi_h", "cost_mean_usd", "cost_hi_usd")]
        + [f"{r['step_time_s']:.4g}", f"{r['efficiency']:.0%}"]
        for i, (_, r) in enumerate(result.ranked.iterrows(), start=1)
    ]
    assert table["rows"] == want
    fig = page.evaluate(FIGURE_JS, "srifty-figure")
    # the front's coordinates, which every drawing of a search uses (plots.cost_time_axes),
    # placed where the axes' own ticks say: a mark is read against them
    (x, _), (y, _) = cost_time_axes(result.constraints.confidence).values()
    across, up = (_log_axis(ticks) for ticks in fig["ticks"])

    def pixel(t: float, c: float) -> tuple[float, float]:
        return across(t), up(c)

    mark = {name: i for i, name in enumerate(MARKS)}
    front = [_xy(p) for p in fig["points"][mark["front_dots"]]]
    assert len(front) == len(result.pareto)
    want_front = [pixel(t, c) for t, c in zip(result.pareto[x], result.pareto[y], strict=True)]
    assert np.allclose(sorted(front), sorted(want_front), atol=0.5)
    pick = [_xy(p) for p in fig["points"][mark["pick"]]]
    assert np.allclose(pick, [pixel(result.pick[x], result.pick[y])], atol=0.5)
    knee = [_xy(p) for p in fig["points"][mark["knee"]]]
    assert np.allclose(knee, [pixel(result.knee[x], result.knee[y])], atol=0.5)
    deadline_x = float(re.match(r"M([-\d.e]+),", fig["lines"][mark["deadline"]]).group(1))
    assert deadline_x == pytest.approx(across(result.why.deadline_h), abs=0.5)
    assert 0 <= min(p for p, _ in front) and max(p for p, _ in front) <= fig["width"]
    # the count is the message's, right above the figure (a fixed title: one update less)
    said = page.locator(".srifty-message").inner_text()
    assert f"{result.n_feasible:,} of {result.n_candidates:,}" in said
    assert fig["title"] == "Cost-time tradeoff"


def _assert_reason_says(page, explanation: str) -> None:
    """Notebook 03's "Why this one" cell (below the panel) says ``explanation``."""
    said = page.evaluate(
        "() => { const r = document.querySelector('.srifty-reason pre');"
        " return r ? r.textContent : null; }"
    )
    assert said == explanation


def _eventually(page, check, *args, timeout_s: float = 60) -> None:
    """``check(*args)`` until it passes: the page applies the kernel's updates one message at a
    time (bqplot draws on the next animation frame), so a read can land between two."""
    import time

    end = time.monotonic() + timeout_s
    while True:
        try:
            check(*args)
            return
        except AssertionError:
            if time.monotonic() > end:
                raise
            page.wait_for_timeout(200)


def _wait_table(page, attribute: str, value: str) -> None:
    page.wait_for_function(
        "([a, v]) => { const t = document.querySelector('.srifty-table table.srifty-ranked');"
        " return t && t.dataset[a] === v; }",
        arg=[attribute, value],
        timeout=60_000,
    )


def test_search_panel_follows_the_deadline_and_spot_exactly_as_search(page, fitted):
    _, model = fitted
    catalog = load_catalog()
    name = _parameterize(fitted, "03_search_ec2.ipynb", "03.ipynb", NOTEBOOK_03)
    run_notebook_in_lab(page, page.lab, name, ".srifty-table table.srifty-ranked tbody tr")
    first = page.evaluate(TABLE_JS, "srifty-table")["data"]
    assert float(first["deadline"]) == NOTEBOOK_03["deadline_h"] and first["spot"] == "false"
    _eventually(page, _assert_panel_shows, page, _expected(first, model, catalog))
    # one panel: the static copies of its answer and reason (for an export where no widget
    # draws) take no room where the widgets draw
    assert page.locator(".srifty-search-panel").count() == 1
    copies = page.locator(".srifty-static")
    assert copies.count() == 2
    for i in range(2):
        area = copies.nth(i).evaluate("(e) => e.closest('.jp-OutputArea-child').offsetHeight")
        assert not copies.nth(i).is_visible() and area == 0
    # the cost-time figure's ticks read as people write them: '0.5', never '500m' or '1e+3'
    drawn = page.evaluate(TICK_LABELS_JS, "srifty-search-panel")
    ticks = [t for a in drawn for t in a["ticks"]]
    assert ticks and all(_plain_decimal(t) for t in ticks), ticks
    # each axis's name is clear of its tick labels (it was drawn over the cost axis's
    # '10,000', '5,000', '2,000' and '1,000')
    for a in drawn:
        assert a["labelBox"], a["label"]
        l0, r0, t0, b0 = a["labelBox"]
        for tick, (l1, r1, t1, b1) in zip(a["ticks"], a["boxes"], strict=True):
            assert r0 <= l1 or r1 <= l0 or b0 <= t1 or b1 <= t0, (a["label"], tick)

    # move the deadline slider five stops to the left: a tighter deadline
    slider_press(page, "srifty-deadline", "ArrowLeft", 5)
    readout = page.locator(".srifty-deadline .widget-readout")
    page.wait_for_function(
        "() => { const t = document.querySelector('.srifty-table table.srifty-ranked');"
        " const r = document.querySelector('.srifty-deadline .widget-readout');"
        " return t && r && parseFloat(t.dataset.deadline) === parseFloat(r.textContent)"
        f" && parseFloat(t.dataset.deadline) < {NOTEBOOK_03['deadline_h']}; }}",
        timeout=60_000,
    )
    moved = page.evaluate(TABLE_JS, "srifty-table")["data"]
    assert float(moved["deadline"]) == float(readout.text_content())
    tighter = _expected(moved, model, catalog)
    assert tighter.n_feasible < _expected(first, model, catalog).n_feasible
    _eventually(page, _assert_panel_shows, page, tighter)
    # the "Why this one" cell below follows too: printed once, it named the first pick
    _eventually(page, _assert_reason_says, page, tighter.explanation)
    # and the static copy, so that the notebook saved now reads as this answer
    copied = page.locator(".srifty-static table.srifty-ranked")
    assert copied.get_attribute("data-deadline") == moved["deadline"]

    # allow spot: new candidates, evaluated once, ranked against the same deadline
    page.locator(".srifty-spot input[type=checkbox]").check()
    _wait_table(page, "spot", "true")
    spot = page.evaluate(TABLE_JS, "srifty-table")["data"]
    assert spot["deadline"] == moved["deadline"]
    with_spot = _expected(spot, model, catalog)
    assert with_spot.n_candidates > tighter.n_candidates
    _eventually(page, _assert_panel_shows, page, with_spot)
    page.locator(".srifty-search-panel").screenshot(path=str(SCREENSHOTS / "03_search_panel.png"))


def test_search_panel_says_what_binds_when_nothing_fits(page, fitted):
    _, model = fitted
    catalog = load_catalog()
    name = _parameterize(fitted, "03_search_ec2.ipynb", "03_tight.ipynb", NOTEBOOK_03)
    run_notebook_in_lab(page, page.lab, name, ".srifty-table table.srifty-ranked tbody tr")
    # the shortest deadline the slider offers: nothing finishes in 36 seconds
    slider_press(page, "srifty-deadline", "Home")
    _wait_table(page, "nFeasible", "0")
    message = page.locator(".srifty-message").inner_text()
    assert "deadline binds" in message and "Nearest" in message
    assert page.locator(".srifty-table tbody tr").count() == 0
    mark = {name: i for i, name in enumerate(MARKS)}

    def only_the_nearest():
        fig = page.evaluate(FIGURE_JS, "srifty-figure")
        assert fig["points"][mark["pick"]] == [] and len(fig["points"][mark["nearest"]]) == 1

    _eventually(page, only_the_nearest)
    data = pd.Series(page.evaluate(TABLE_JS, "srifty-table")["data"])
    assert float(data["deadline"]) == 0.01
    _eventually(page, _assert_reason_says, page, _expected(data, model, catalog).explanation)
    # the reason wraps between words (JupyterLab breaks an output's pre anywhere: "mis|ses")
    style = page.evaluate(
        "() => getComputedStyle(document.querySelector('.srifty-why-text')).wordBreak"
    )
    assert style != "break-all"
    # the probe button says what it does in full, not "What to measu..."
    button = page.locator(".srifty-probe-button")
    assert button.evaluate("(b) => b.scrollWidth <= b.clientWidth")
    assert button.inner_text().strip() == "What to measure next"


def test_search_panel_decides_among_a_candidates_file(page, fitted):
    # "I can get 2, 4 or 16 nodes of g4dn.12xlarge; which?", asked in notebook 03
    root, model = fitted
    listed = listed_candidates(root / "listed.csv")
    question = {**NOTEBOOK_03, "deadline_h": 100.0, "candidates_file": str(listed)}
    name = _parameterize(fitted, "03_search_ec2.ipynb", "03_listed.ipynb", question)
    run_notebook_in_lab(page, page.lab, name, ".srifty-table table.srifty-ranked tbody tr")
    message = page.locator(".srifty-message").inner_text()
    assert "of 2 listed configurations meet the constraints" in message
    assert "over the node limit of 8: 16 x g4dn.12xlarge" in message
    rows = page.locator(".srifty-table tbody tr").all_inner_texts()
    assert rows and all(re.search(r"\b[24] x g4dn\.12xlarge \(", row) for row in rows), rows
    # the list fixes each row's batch and names no mixes: those controls are greyed out
    assert page.locator(".srifty-batches select").is_disabled()
    assert page.locator(".srifty-mixes input").is_disabled()
    # the deadline still chooses among the list, as search() does with the same list
    data = page.evaluate(TABLE_JS, "srifty-table")["data"]
    job = json.loads(data["job"])
    job["local_bsz"] = tuple(job["local_bsz"]) if job["local_bsz"] is not None else None
    expected = search(
        model,
        load_catalog(),
        Job(**job),
        Constraints(deadline_h=100.0, max_nodes=8, spot=False),
        candidates=pd.read_csv(listed),
    )
    assert f"{expected.n_feasible:,} of" in message


def _no_tick_labels_overlap(page, panel: str) -> None:
    for a in page.evaluate(TICK_LABELS_JS, panel):
        boxes = a["boxes"]
        for i, (l0, r0, t0, b0) in enumerate(boxes):
            for j, (l1, r1, t1, b1) in enumerate(boxes[:i]):
                apart = r0 <= l1 or r1 <= l0 or b0 <= t1 or b1 <= t0
                assert apart, (a["label"], a["ticks"][j], a["ticks"][i])


def test_search_panel_ticks_stay_apart_over_many_decades(page, reference_measurements):
    """Notebook 03 at its defaults on the EC2 reference (bert), batch 1 alone ticked: the
    times run from 8 h to 30,000 h, and at 1-2-5 ticks '5,000 10,00020,000' printed into one
    another."""
    root = page.lab_root
    nb = load_notebook_node(str(REPO / "notebooks" / "03_search_ec2.ipynb"))
    nbformat.write(nb, root / "03_defaults.ipynb")
    run_notebook_in_lab(
        page, page.lab, "03_defaults.ipynb", ".srifty-table table.srifty-ranked tbody tr"
    )
    page.locator(".srifty-batches select").select_option("1")
    page.wait_for_function(
        "() => { const t = document.querySelector('.srifty-table table.srifty-ranked');"
        " return t && JSON.parse(t.dataset.job).local_bsz.join() === '1'; }",
        timeout=60_000,
    )
    _eventually(page, _no_tick_labels_overlap, page, "srifty-search-panel")
    ticks = [t for a in page.evaluate(TICK_LABELS_JS, "srifty-search-panel") for t in a["ticks"]]
    assert len(ticks) >= 6 and all(_plain_decimal(t) for t in ticks), ticks


# -- notebook 05: the four lessons ---------------------------------------------------------------

NOTEBOOK_05 = {
    "samples": 1.2e8,
    "reference_bsz": 256,
    "noise_scale": 2000.0,
    "scaling_noise_scale": 2000.0,  # lesson a starts here: two stops left is 500
    "local_bsz": 32,
    "controller_bsz": 32,
    "other_type": "g6.12xlarge",
    "runs": 500,
    "deadline_h": 4.0,
    "interactive": True,
}
ANSWER_JS = """
(cls) => {
  const a = document.querySelector('.' + cls + ' .srifty-answer');
  return a ? {text: a.textContent, inputs: JSON.parse(a.dataset.inputs)} : null;
}
"""
# the entries of a panel's figure legends, as drawn
LEGEND_JS = """
(cls) => Array.from(document.querySelectorAll('.' + cls + ' g.g_legend text')).map(
    (t) => t.textContent)
"""
# lesson panel -> (question control, key, presses, the input it moves, the stop it lands on,
# that stop's label): one move per lesson, to the stop its question names
QUESTIONS = {
    "srifty-lesson-scaling": (
        "srifty-noise-scale", "ArrowLeft", 2, ("job", "noise_scale"), 500.0, "500",
    ),
    "srifty-lesson-spot": (
        "srifty-checkpoint-interval", "ArrowRight", 3, ("job", "checkpoint_interval_h"), 6.0,
        "6 h",
    ),
    "srifty-lesson-controller": (
        "srifty-slow-factor", "ArrowRight", 2, ("slow_factor",), 2.0, "2x",
    ),
    "srifty-lesson-variance": ("srifty-deadline", "ArrowRight", 2, ("deadline_h",), 8.0, "8 h"),
}  # fmt: skip


def _job(fields: dict) -> Job:
    fields = dict(fields)
    if fields["local_bsz"] is not None:
        fields["local_bsz"] = tuple(fields["local_bsz"])
    return Job(**fields)


def _lesson_answer(panel: str, inputs: dict, model, catalog, measured) -> str:
    """What the decide layer answers for the inputs the panel says it used."""
    job = _job(inputs["job"])
    if panel == "srifty-lesson-scaling":
        return tradeoffs.scaling(
            model,
            catalog,
            job,
            inputs["instance_type"],
            inputs["local_bsz"],
            max_nodes=inputs["max_nodes"],
            level=inputs["level"],
            measurements=measured,
        ).text()
    if panel == "srifty-lesson-spot":
        return tradeoffs.spot_tradeoff(
            model,
            catalog,
            job,
            inputs["instance_type"],
            inputs["num_nodes"],
            inputs["local_bsz"],
            bucket=inputs["bucket"],
            deadline_h=inputs["deadline_h"],
            level=inputs["level"],
            runs=inputs["runs"],
        ).text()
    if panel == "srifty-lesson-controller":
        return tradeoffs.controller_lesson(
            model,
            catalog,
            job,
            tuple(inputs["instance_types"]),
            tuple(inputs["num_nodes"]),
            inputs["local_bsz"],
            steps=inputs["steps"],
            slow_at=inputs["slow_at"],
            slow_factor=inputs["slow_factor"],
            measurements=measured,
        ).text()
    constraints = Constraints(confidence=inputs["confidence"], max_nodes=inputs["max_nodes"])
    priced = catalog[catalog["ondemand_usd_per_hr"].notna()]
    evaluated = evaluate(model, priced, job, constraints)
    return tradeoffs.deadline_judgement(evaluated, inputs["deadline_h"], runs=inputs["runs"]).text()


def test_each_lesson_answers_as_the_decide_layer_does_when_its_control_moves(page, fitted):
    from srifty_kit.present.lessons import lesson_setup

    root, model = fitted
    _, catalog, measured, _ = lesson_setup(str(root / "model.json"), None)
    name = _parameterize(fitted, "05_tradeoffs.ipynb", "05.ipynb", NOTEBOOK_05)
    run_notebook_in_lab(page, page.lab, name, ".srifty-lesson-variance .srifty-answer")
    for panel, (control, key, times, path, stop, label) in QUESTIONS.items():
        before = page.evaluate(ANSWER_JS, panel)
        assert before["text"] == _lesson_answer(panel, before["inputs"], model, catalog, measured)
        figure_before = page.evaluate(FIGURE_JS, f"{panel} .srifty-figure")
        slider_press(page, f"{panel} .{control}", key, times)
        readout = page.locator(f".{panel} .{control} .widget-readout").inner_text()
        assert readout.strip() == label  # the stop the question names, in the answer's unit
        page.wait_for_function(
            "([cls, path, value]) => { const a = document.querySelector("
            "'.' + cls + ' .srifty-answer'); if (!a) return false;"
            " let v = JSON.parse(a.dataset.inputs); for (const k of path) v = v[k];"
            " return v === value; }",
            arg=[panel, list(path), stop],
            timeout=120_000,
        )
        after = page.evaluate(ANSWER_JS, panel)
        assert after["text"] != before["text"]
        assert after["text"] == _lesson_answer(panel, after["inputs"], model, catalog, measured)

        def figure_moved(before=figure_before, panel=panel):
            assert page.evaluate(FIGURE_JS, f"{panel} .srifty-figure") != before

        _eventually(page, figure_moved)
        page.locator(f".{panel}").screenshot(path=str(SCREENSHOTS / f"05_{panel[14:]}.png"))
    # lesson d's two histograms are told apart on the figure itself, not only in its caption
    legend = page.evaluate(LEGEND_JS, "srifty-lesson-variance")
    assert legend == ["pick by point estimate", "pick by upper end", "deadline"], legend


# a figure of a panel by its title: per mark (in the figure's order; the legend is no mark),
# how many points it drew
TITLED_POINTS_JS = """
([cls, title]) => {
  const heads = Array.from(document.querySelectorAll('.' + cls + ' text.mainheading'));
  const head = heads.find((h) => h.textContent === title);
  if (!head) return null;
  const marks = head.closest('svg.svg-figure').querySelector(':scope > g > g').children;
  return Array.from(marks).filter((g) => !g.classList.contains('g_legend')).map(
      (g) => g.querySelectorAll('g.object_grp').length);
}
"""


def _open_controller_lesson(page, fitted, name: str) -> str:
    """Notebook 05 with lesson c alone on the reference fit, run in JupyterLab as ``name``
    until its answer shows; the lesson panel's class."""
    root, _ = fitted
    nb = load_notebook_node(str(REPO / "notebooks" / "05_tradeoffs.ipynb"))
    nb = parameterize_notebook(nb, {"lessons": "c", "interactive": True})  # the reference fit
    nbformat.write(nb, root / name)
    panel = "srifty-lesson-controller"
    run_notebook_in_lab(page, page.lab, name, f".{panel} .srifty-answer")
    return panel


def test_the_controller_lesson_draws_each_types_measured_steps(
    page, fitted, reference_measurements
):
    """The controller lesson's third figure on the reference fit (the session model's workload
    was never campaigned): one dot per measured batch of each type, as the decide layer has."""
    from srifty_kit.present.lessons import ControllerLesson, lesson_setup

    panel = _open_controller_lesson(page, fitted, "05_c.ipynb")
    inputs = page.evaluate(ANSWER_JS, panel)["inputs"]
    model, catalog, measured, _ = lesson_setup(None, None)
    args = (model, catalog, _job(inputs["job"]), tuple(inputs["instance_types"]),
            tuple(inputs["num_nodes"]), inputs["local_bsz"])  # fmt: skip
    seen = tradeoffs.controller_lesson(
        *args, steps=inputs["steps"], slow_at=inputs["slow_at"], measurements=measured
    ).measured
    want = [int((seen["instance_type"] == t).sum()) for t in inputs["instance_types"]]
    assert min(want) > 0  # both reference types were measured at the lesson's batches
    names = list(ControllerLesson(*args, measurements=measured).line_marks)  # the marks' order

    def dots_drawn():
        counts = page.evaluate(TITLED_POINTS_JS, [panel, "One worker's step against its batch"])
        assert counts is not None and len(counts) == len(names), counts
        assert [counts[names.index(m)] for m in ("measured_a", "measured_b")] == want

    _eventually(page, dots_drawn)


# a figure's mark by its title and position (the legend is no mark): its line's points on the
# screen where the plot area shows them, and every legend of the panel that has entries, as
# boxes on the screen (left, right, top, bottom) with their entries' text
LINE_AND_LEGENDS_JS = """
([cls, title, index]) => {
  const heads = Array.from(document.querySelectorAll('.' + cls + ' text.mainheading'));
  const head = heads.find((h) => h.textContent === title);
  if (!head) return null;
  const svg = head.closest('svg.svg-figure');
  const marks = Array.from(svg.querySelector(':scope > g > g').children).filter(
      (g) => !g.classList.contains('g_legend'));
  const path = marks[index].querySelector('path.line');
  // the plot area's background lies in the figure's other svg, beside this one
  const area = svg.parentElement.querySelector('rect.plotarea_background')
      .getBoundingClientRect();
  const ctm = path.getScreenCTM();
  const length = path.getTotalLength();
  const points = [];
  for (let i = 0; i <= 200; i++) {
    const q = path.getPointAtLength(length * i / 200);
    const x = ctm.a * q.x + ctm.c * q.y + ctm.e, y = ctm.b * q.x + ctm.d * q.y + ctm.f;
    if (x >= area.left && x <= area.right && y >= area.top && y <= area.bottom) points.push([x, y]);
  }
  const legends = Array.from(document.querySelectorAll('.' + cls + ' g.g_legend')).filter(
      (g) => g.querySelectorAll('text').length).map((g) => {
    const r = g.getBoundingClientRect();
    return {box: [r.left, r.right, r.top, r.bottom],
            entries: Array.from(g.querySelectorAll('text')).map((t) => t.textContent)};
  });
  return {points, legends};
}
"""


def test_the_controller_lessons_legend_covers_none_of_the_slowed_workers_line(page, fitted):
    """On the reference fit with worker 0 slowed 2x, the legend of the controller lesson's
    right-hand figure, as the browser lays it out, covers no point of worker 0's dashed line
    (it did: bqplot drew it inside the plot, over the line's steep rise)."""
    from srifty_kit.present.lessons import ControllerLesson, lesson_setup

    panel = _open_controller_lesson(page, fitted, "05_c_legend.ipynb")
    slider_press(page, f"{panel} .srifty-slow-factor", "ArrowRight", 2)
    page.wait_for_function(
        "(cls) => { const a = document.querySelector('.' + cls + ' .srifty-answer');"
        " return !!a && JSON.parse(a.dataset.inputs).slow_factor === 2; }",
        arg=panel,
        timeout=120_000,
    )
    model, catalog, measured, workload = lesson_setup(None, None)
    job = Job(workload, samples=2e7, reference_bsz=128, noise_scale=2000.0)
    names = list(ControllerLesson(model, catalog, job, measurements=measured).line_marks)
    title = "One worker's step against its batch"

    def clear_of_the_line():
        drawn = page.evaluate(LINE_AND_LEGENDS_JS, [panel, title, names.index("slowed")])
        assert drawn is not None and len(drawn["points"]) > 20, drawn
        legend = [g for g in drawn["legends"] if "worker 0 slowed 2x" in g["entries"]]
        assert len(legend) == 1, drawn["legends"]
        left, right, top, bottom = legend[0]["box"]
        under = [(x, y) for x, y in drawn["points"] if left <= x <= right and top <= y <= bottom]
        assert not under, f"the legend {legend[0]['box']} covers the dashed line at {under[:3]}"

    _eventually(page, clear_of_the_line)
    page.locator(f".{panel}").screenshot(path=str(SCREENSHOTS / "05_controller_slowed.png"))


# every axis of a panel's figures: its label and the text of its tick labels, as drawn (bqplot
# also draws an empty g.axis, with neither)
TICK_LABELS_JS = """
(cls) => Array.from(document.querySelectorAll('.' + cls + ' g.axis')).map((a) => ({
  label: (a.querySelector('text.axislabel') || {}).textContent || '',
  ticks: Array.from(a.querySelectorAll('g.tick text')).map((t) => t.textContent),
  boxes: Array.from(a.querySelectorAll('g.tick text')).map((t) => {
    const r = t.getBoundingClientRect();
    return [r.left, r.right, r.top, r.bottom];
  }),
  labelBox: ((t) => {
    if (!t || !t.textContent) return null;
    const r = t.getBoundingClientRect();
    return [r.left, r.right, r.top, r.bottom];
  })(a.querySelector('text.axislabel')),
})).filter((a) => a.label || a.ticks.length)
"""


def _plain_decimal(tick: str) -> bool:
    """A tick label as people write a number: '0.5', '12.7', '1,200', '40%'; never an exponent
    ('1.2e+3') or an SI prefix ('500m')."""
    return re.fullmatch(r"-?(\d+|\d{1,3}(,\d{3})+)(\.\d+)?%?", tick) is not None


def test_the_lessons_ticks_read_as_people_write_them(page, fitted, reference_measurements):
    """On the reference fit, the spot lesson at the Spot Advisor's '<5%' (Young/Daly's
    interval past 10 h) and the controller lesson at batch 1,024 with worker 0 slowed 4x
    (steps past 1 s): every tick label is a plain decimal, never an exponent ('1.2e+3'), and
    the Young/Daly tick reads as the answer states it, in three digits ('12.7', not '13'),
    clear of its neighbours' labels (not '1012.7')."""
    root, _ = fitted
    nb = load_notebook_node(str(REPO / "notebooks" / "05_tradeoffs.ipynb"))
    nb = parameterize_notebook(
        nb, {"lessons": "bc", "controller_bsz": 1024, "runs": 200, "interactive": True}
    )
    nbformat.write(nb, root / "05_ticks.ipynb")
    run_notebook_in_lab(
        page, page.lab, "05_ticks.ipynb", ".srifty-lesson-controller .srifty-answer"
    )
    spot, controller = "srifty-lesson-spot", "srifty-lesson-controller"
    page.locator(f".{spot} .srifty-bucket select").select_option(label="<5% of capacity a month")
    slider_press(page, f"{controller} .srifty-slow-factor", "ArrowRight", 4)  # 1x -> 4x
    for panel, path, value in ((spot, "bucket", "<5%"), (controller, "slow_factor", 4.0)):
        page.wait_for_function(
            "([cls, key, value]) => { const a = document.querySelector("
            "'.' + cls + ' .srifty-answer'); return !!a && JSON.parse(a.dataset.inputs)[key]"
            " === value; }",
            arg=[panel, path, value],
            timeout=120_000,
        )
    said = page.evaluate(ANSWER_JS, spot)["text"]
    young_daly = re.search(r"Young/Daly's .* = ([\d.]+) h\.", said).group(1)
    # the case the defect was found in: three digits past 10, which '.2~g' cut to two
    assert float(young_daly) > 10 and len(young_daly.replace(".", "")) == 3, young_daly

    def plain_ticks():
        drawn = {panel: page.evaluate(TICK_LABELS_JS, panel) for panel in (spot, controller)}
        axes = {panel: {a["label"]: a["ticks"] for a in drawn[panel]} for panel in drawn}
        for panel, every in drawn.items():
            for a in every:  # no two labels of one axis overlap
                boxes = a["boxes"]
                for i, (l0, r0, t0, b0) in enumerate(boxes):
                    for j, (l1, r1, t1, b1) in enumerate(boxes[:i]):
                        apart = r0 <= l1 or r1 <= l0 or b0 <= t1 or b1 <= t0
                        assert apart, (panel, a["label"], a["ticks"][j], a["ticks"][i])
        for panel, by_label in axes.items():
            for label, ticks in by_label.items():
                assert ticks, (panel, label)
                bad = [t for t in ticks if not _plain_decimal(t)]
                assert not bad, (panel, label, ticks)
        assert young_daly in axes[spot]["checkpoint interval (h)"]
        steps = [float(t.replace(",", "")) for t in axes[controller]["step time (ms)"]]
        assert max(steps) >= 1000, steps  # the slowed step passes 1 s: the case is drawn

    _eventually(page, plain_ticks)
    page.locator(f".{spot}").screenshot(path=str(SCREENSHOTS / "05_spot_ticks.png"))
    page.locator(f".{controller}").screenshot(path=str(SCREENSHOTS / "05_controller_ticks.png"))


def _weekly_in_lab(page, root, name: str, parameters: dict):
    """Notebook 04 with ``parameters``, written to ``root / name`` and run in JupyterLab until
    every code cell has run; its node, for the cells' indices and tags."""
    nb = load_notebook_node(str(REPO / "notebooks" / "04_weekly_cost_report.ipynb"))
    nb = parameterize_notebook(nb, parameters)
    nbformat.write(nb, root / name)
    run_notebook_in_lab(page, page.lab, name, ".jp-Notebook")
    page.wait_for_function(
        "() => { const w = window.jupyterapp.shell.currentWidget;"
        " const k = w.sessionContext.session && w.sessionContext.session.kernel;"
        " return k && k.status === 'idle' && w.content.widgets.filter("
        "   (c) => c.model.type === 'code').every((c) => c.model.executionCount !== null); }",
        timeout=300_000,
        polling=500,
    )
    return nb


def test_the_weekly_reports_headline_reads_as_a_sentence_in_jupyterlab(page, fitted):
    root, _ = fitted
    # the packaged sample's last full week; no savings: the headline is what is read here
    nb = _weekly_in_lab(page, root, "04_weekly.ipynb", {"week_start": "2026-11-23", "models": []})
    index = [i for i, c in enumerate(nb.cells) if "summary" in c.metadata.get("tags", [])][0]
    # JupyterLab draws a cell scrolled back into view a moment later: its text is read once
    # it shows (how soon depends on the heights of the cells below it)
    page.evaluate(
        "async (i) => window.jupyterapp.shell.currentWidget.content.scrollToItem(i)", index
    )
    page.wait_for_function(
        "(i) => window.jupyterapp.shell.currentWidget.content.widgets[i]"
        ".outputArea.node.innerText.trim() !== ''",
        arg=index,
        timeout=30_000,
    )
    shown = page.evaluate(
        "async (i) => { const w = window.jupyterapp.shell.currentWidget;"
        " await w.content.scrollToItem(i); const cell = w.content.widgets[i];"
        " const out = cell.outputArea.node;"
        " return { text: out.innerText, json: out.querySelectorAll('.jp-RenderedJSON').length,"
        "   markdown: out.querySelectorAll('.jp-RenderedMarkdown').length }; }",
        index,
    )
    # the headline a finance reader opens the notebook for, not the machines' JSON tree
    assert shown["json"] == 0 and shown["markdown"] == 1, shown
    assert re.match(r"USD: \$2,232 effective cost \(amortised; \$1,037 billed\)", shown["text"])
    assert "week_start" not in shown["text"]


def test_no_amount_of_the_weekly_report_is_typeset_as_a_formula_in_jupyterlab(page, fitted):
    root, _ = fitted
    # with the default models: the savings sentence gives its ends as "at least $a ... at most $b"
    nb = _weekly_in_lab(page, root, "04_math.ipynb", {"week_start": "2026-11-23", "top_n": 5})
    shown = []
    for i, cell in enumerate(nb.cells):
        if cell.cell_type != "code" or "Markdown" not in cell.source + "headline_output":
            continue
        page.evaluate("(i) => window.jupyterapp.shell.currentWidget.content.scrollToItem(i)", i)
        page.wait_for_timeout(1500)  # JupyterLab typesets a rendered output after it shows
        shown.append(
            page.evaluate(
                "(i) => { const out = window.jupyterapp.shell.currentWidget.content"
                ".widgets[i].outputArea.node; return [out.innerText,"
                " out.querySelectorAll('mjx-container, .MathJax').length]; }",
                i,
            )
        )
    text = "\n".join(t for t, _ in shown)
    # a dollar amount is money, never the start of a formula: "$110.24 to $160.94" was drawn
    # as an italic "110.24to160.94"
    assert [n for _, n in shown] == [0] * len(shown), text
    assert re.search(r"at least \$[\d,.]+, 90% sure of at most \$[\d,.]+:", text), text
    assert re.search(r"prediction interval \$[\d,.]+ to \$[\d,.]+ \(", text), text
