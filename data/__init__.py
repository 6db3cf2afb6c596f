"""Embedded defaults shipped with srifty_kit: the EC2 catalog, sample profiles (package data)."""
