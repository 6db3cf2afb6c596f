"""Where an unfinished run keeps its rows: beside an older output, never over an earlier
unfinished run's partial file."""

from __future__ import annotations

from srifty_kit.errors import counted
from srifty_kit.tables.files import (
    Staging,
    atomic_write,
    earlier_partials,
    next_partial,
    partial_path,
)


def write_text(path, text):
    atomic_write(path, lambda tmp: tmp.write_text(text))


def _facts(p):
    return [p.with_name(f"{p.stem}.facts.json")]


def test_each_unfinished_run_takes_the_next_partial_name(tmp_path):
    out = tmp_path / "p.parquet"
    assert next_partial(out) == tmp_path / "p.partial.parquet"
    out.write_text("older")
    for run in (1, 2, 3):
        stage = Staging(out, _facts)
        assert stage.working == partial_path(out, run)
        stage.working.write_text(f"run {run}")
    assert earlier_partials(out) == [partial_path(out, n) for n in (1, 2, 3)]
    assert [p.read_text() for p in earlier_partials(out)] == ["run 1", "run 2", "run 3"]


def test_a_finished_run_drops_only_its_own_partial_files(tmp_path):
    out = tmp_path / "p.csv"
    out.write_text("older")
    (tmp_path / "p.partial.csv").write_text("run 1")
    (tmp_path / "p.partial.2.facts.json").write_text("{}")  # a companion alone takes the name
    (tmp_path / "q.partial.csv").write_text("another output's")
    stage = Staging(out, _facts)
    assert stage.working == tmp_path / "p.partial.3.csv"
    stage.working.write_text("run 3")
    assert "in " in stage.kept() and "rows stay in " + str(tmp_path / "p.partial.csv") in (
        stage.kept()
    )
    stage.finish()
    assert not stage.working.exists()
    assert (tmp_path / "p.partial.csv").read_text() == "run 1"
    assert (tmp_path / "p.partial.2.facts.json").is_file()


def test_an_unfinished_runs_output_is_set_aside_before_a_finished_run_replaces_it(tmp_path):
    out = tmp_path / "p.csv"
    out.write_text("unfinished rows")
    _facts(out)[0].write_text('{"finished": false}')
    stage = Staging(out, _facts, unfinished=lambda p: True)
    assert stage.aside == tmp_path / "p.partial.csv"  # kept for them; the run works after it
    assert stage.working == tmp_path / "p.partial.2.csv"
    stage.working.write_text("this run, so far")
    stage.set_aside()
    write_text(out, "finished rows")  # the finished run's own write replaces p.csv
    stage.finish()
    assert out.read_text() == "finished rows"
    assert (tmp_path / "p.partial.csv").read_text() == "unfinished rows"
    assert (tmp_path / "p.partial.facts.json").read_text() == '{"finished": false}'
    assert not stage.working.exists()
    assert stage.note() == f"the unfinished run's rows that {out} held are now in {stage.aside}"
    assert Staging(out, _facts).aside is None  # a finished output is replaced, as before


def test_earlier_runs_are_counted_in_the_note_singular_or_plural(tmp_path):
    out = tmp_path / "p.csv"
    out.write_text("older")
    (tmp_path / "p.partial.csv").write_text("run 1")
    assert Staging(out, _facts).note() == (
        f"an earlier unfinished run's rows stay in {tmp_path / 'p.partial.csv'}"
    )
    (tmp_path / "p.partial.2.csv").write_text("run 2")
    note = Staging(out, _facts).note()
    assert note.startswith("2 earlier unfinished runs' rows stay in "), note
    assert "an earlier unfinished runs'" not in note


def test_counts_say_their_noun_singular_or_plural():
    assert counted(1, "step") == "1 step"
    assert counted(0, "prediction") == "0 predictions"
    assert counted(1234, "instance type") == "1,234 instance types"
    assert counted(2, "batch", "batches") == "2 batches"


def test_no_older_output_no_partial_file_and_nothing_to_say(tmp_path):
    stage = Staging(tmp_path / "p.csv", _facts)
    assert stage.working == tmp_path / "p.csv" and stage.note() == ""
    assert stage.kept() == f"in {tmp_path / 'p.csv'}"
