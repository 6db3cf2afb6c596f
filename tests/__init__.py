"""Tests, laid out like the package they test."""
