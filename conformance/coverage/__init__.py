"""Spec coverage: which states, edges and actions of a small config's state graph a corpus reached.

May import: `validate`, `tla` and `errors`.
"""
