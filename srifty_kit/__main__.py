"""``python -m srifty_kit`` runs the ``srifty`` command."""

import sys

from .cli import main

sys.exit(main())
