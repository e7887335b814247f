"""Mutation testing: how much of a broken implementation the fuzz + conformance pipeline catches.

May import: `fuzz`, `validate`, `bridge`, `tla`, `errors` and `kreplica.impl`.
"""
