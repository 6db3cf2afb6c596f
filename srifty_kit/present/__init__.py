"""Present layer: figures, papermill reports and the demo (and, beside ``srifty_kit.cli``,
everything a person looks at). May import every lower layer; nothing imports it but the CLI.
"""
