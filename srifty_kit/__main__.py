"""``python -m srifty_kit`` runs the ``srifty`` command."""

import sys

from srifty_kit.cli import main

sys.exit(main())
