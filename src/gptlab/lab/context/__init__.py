"""Longer than trained (view 11): a run at a context past its training length (window) and
the context experiment's curves (results)."""
