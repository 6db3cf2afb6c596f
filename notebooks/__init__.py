"""The report notebooks shipped with srifty_kit, run by srifty_kit.present.reports (package data)."""
