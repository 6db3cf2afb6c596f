"""Tests of srifty_kit.cli."""
