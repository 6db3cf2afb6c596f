"""The package tree is the pipeline: layer subpackages, imports flowing one way."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "srifty_kit"
# lowest first: a module may import its own layer and the layers before it, never a later one
LAYERS = ("tables", "catalog", "measure", "model", "decide", "present", "cli")
TOP_LEVEL = {"__init__.py", "__main__.py", "errors.py"}


def _layer(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[0] == "srifty_kit" and parts[1] in LAYERS else None


def _module_name(path: Path, root: Path = PACKAGE) -> str:
    rel = path.relative_to(root.parent).with_suffix("")
    parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
    return ".".join(parts)


def _imports(path: Path, root: Path) -> list[tuple[int, str]]:
    """(line, absolute module) of every import in a file, relative ones resolved."""
    package = _module_name(path, root).split(".")
    if path.name != "__init__.py":
        package = package[:-1]
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package[: len(package) - node.level + 1] + ([base] if base else []))
            # ``from srifty_kit import decide`` names the layer in the alias
            names = [f"{base}.{a.name}" for a in node.names] if base == "srifty_kit" else [base]
            out += [(node.lineno, name) for name in names]
    return out


def _violations(root: Path) -> list[str]:
    found = []
    for path in sorted(root.rglob("*.py")):
        own = _layer(_module_name(path, root))
        if own is None:
            continue
        for line, target in _imports(path, root):
            other = _layer(target)
            if other is not None and LAYERS.index(other) > LAYERS.index(own):
                found.append(f"{path.relative_to(root.parent)}:{line}: {own} imports {target}")
    return found


def test_package_top_level_holds_only_the_layers():
    modules = {p.name for p in PACKAGE.glob("*.py")}
    assert modules == TOP_LEVEL
    layers = {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").is_file()}
    assert set(LAYERS) <= layers and layers - set(LAYERS) <= {"data", "notebooks"}


def test_no_layer_imports_a_higher_one():
    assert _violations(PACKAGE) == []


@pytest.mark.parametrize(
    ("where", "source"),
    [
        ("model/bad.py", "from srifty_kit.decide.planner import search\n"),
        ("tables/bad.py", "from ..catalog import query\n"),
        ("measure/distributed/bad.py", "import srifty_kit.present.plots\n"),
    ],
)
def test_the_direction_check_catches_an_upward_import(tmp_path, where, source):
    root = tmp_path / "srifty_kit"
    (root / where).parent.mkdir(parents=True)
    (root / where).write_text(source)
    assert len(_violations(root)) == 1


def test_every_layer_says_what_lives_there_and_what_it_may_import():
    for layer in LAYERS:
        doc = ast.get_docstring(ast.parse((PACKAGE / layer / "__init__.py").read_text()))
        assert doc, f"srifty_kit/{layer}/__init__.py has no docstring"


def test_every_public_function_has_a_docstring():
    missing = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.parse(path.read_text()).body:
            nodes = [node] + (list(node.body) if isinstance(node, ast.ClassDef) else [])
            for item in nodes:
                public = isinstance(item, ast.FunctionDef | ast.ClassDef) and not (
                    item.name.startswith("_")
                )
                if public and ast.get_docstring(item) is None:
                    missing.append(f"{path.relative_to(PACKAGE.parent)}:{item.lineno} {item.name}")
    assert missing == []


def test_model_layer_is_smaller_and_each_module_states_its_equation():
    """Issue 20's item 6: fewer modules than the 16 the layer had, each with its equation."""
    modules = sorted(p for p in (PACKAGE / "model").glob("*.py") if p.name != "__init__.py")
    assert len(modules) < 16, [p.name for p in modules]
    for path in modules:
        doc = ast.get_docstring(ast.parse(path.read_text())) or ""
        # an equation is a line of the docstring that sets something equal to something
        assert any(" = " in line or " ~ " in line for line in doc.splitlines()), path.name
