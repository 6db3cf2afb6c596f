"""Tests of srifty_kit.model."""
