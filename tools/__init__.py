"""Developer tools kept out of the gptlab package; run them from the repository root, e.g.
`python -m tools.screenshots`."""
