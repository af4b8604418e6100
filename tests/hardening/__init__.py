"""Tests of the security pass's fixes: the codes in their docstrings (H1, M5, L3, ...) are the rows of the
table in bench/README.md, *Security*."""
