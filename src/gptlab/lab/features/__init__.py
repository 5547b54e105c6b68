"""View 15, Features: a sparse dictionary's features on a run (gptlab.interp.sae)."""
