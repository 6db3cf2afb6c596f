"""Tests of srifty_kit.measure."""
