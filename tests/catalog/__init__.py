"""Tests of srifty_kit.catalog."""
