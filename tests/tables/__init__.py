"""Tests of srifty_kit.tables."""
