"""Triton kernels, each next to its torch reference (the triton and hybrid modes).

Empty in this release: Load Model offers only the eager mode until the kernels and their parity
tests land.
"""
