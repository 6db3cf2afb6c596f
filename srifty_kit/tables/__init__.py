"""Data layer: table contracts and their validation, file I/O, where the reference data is.

Imports only ``srifty_kit.errors``; every other layer may import it.
"""
