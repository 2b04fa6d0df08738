"""What every room needs and none should import another room for: the error base class,
the hardware probe, the cache root and atomic file writes. Imports nothing of specrag.
"""
