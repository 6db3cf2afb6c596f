"""Embedded defaults shipped with srifty_kit (package data): the EC2 catalog and sample
profiles. Where they and the team's reference data are found: ``srifty_kit.tables.reference``."""
