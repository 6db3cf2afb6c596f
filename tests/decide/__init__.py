"""Tests of srifty_kit.decide."""
