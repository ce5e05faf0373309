"""Lowering passes: each a pure function over the loop IR, listed in order in lower.py."""
