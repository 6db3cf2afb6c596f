"""Data layer: the EC2 catalog (specs and prices).

``query`` holds the pure functions over a catalog DataFrame; ``aws`` fetches a fresh one from
AWS with boto3. A further price source gets its own module beside ``aws`` that returns the
same table. Imports only ``srifty_kit.tables`` and ``srifty_kit.errors``.
"""
