# The README's two commands: `make demo` and `make test`. Each works from nothing on a fresh
# machine: it creates .venv, installs the project, then runs.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: demo test lint setup clean chromium focus

setup: $(STAMP) chromium focus

# torch is installed first and pinned: on the project's machines torch==2.13.0 is a CPU build
# that lies on disk, and any other request downloads gigabytes (see DEVELOPERS.md).
$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet "torch==$${TORCH_VERSION:-2.13.0}"
	$(BIN)/python -m pip install --quiet -e ".[dev]"
	$(BIN)/python -m ipykernel install --sys-prefix --name python3 >/dev/null
	touch $(STAMP)

# The browser tests drive Debian's chromium: Playwright cannot download its own browser on these
# machines. Installed once (apt-get, through sudo when not root); a no-op when present.
chromium:
	@command -v chromium >/dev/null || { \
	  SUDO=$$([ "$$(id -u)" = 0 ] || echo sudo); \
	  $$SUDO apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq chromium >/dev/null; }

# The FinOps Foundation's focus-validator runs from a venv of its own (.venv-focus): it needs
# Python >= 3.12 and pins numpy < 2, which pyarrow 26 refuses (17, pinned as in the README,
# takes it). Built when such a Python is found (on the PATH or under pyenv); otherwise, or when
# the install fails, its test skips with that reason and the report says it did not run.
focus:
	@test -x .venv-focus/bin/focus-validator || { \
	  PY=$$(for p in python3.13 python3.12 $$HOME/.pyenv/versions/3.1[2-9]*/bin/python3; do \
	    $$p -c 'import sys; assert sys.version_info >= (3, 12)' 2>/dev/null && { echo $$p; break; }; \
	  done); \
	  if [ -z "$$PY" ]; then echo "focus-validator: no Python >= 3.12 found; its test skips"; \
	  else $$PY -m venv .venv-focus && \
	    .venv-focus/bin/pip install --quiet focus-validator==2.2.1 "pyarrow<18" || \
	    { rm -rf .venv-focus; echo "focus-validator: install failed; its test skips"; }; fi; }

demo: $(STAMP)
	$(BIN)/srifty demo

test: $(STAMP) chromium focus
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/python -m pytest -q

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

clean:
	rm -rf $(VENV) .venv-focus build *.egg-info
