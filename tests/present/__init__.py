"""Tests of srifty_kit.present."""
