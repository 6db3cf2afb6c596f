# The README's two commands: `make demo` and `make test`. Each works from nothing on a fresh
# machine: it creates .venv, installs the project, then runs.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: demo test lint setup clean chromium

setup: $(STAMP) chromium

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

demo: $(STAMP)
	$(BIN)/srifty demo

test: $(STAMP) chromium
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/python -m pytest -q

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

clean:
	rm -rf $(VENV) build *.egg-info
