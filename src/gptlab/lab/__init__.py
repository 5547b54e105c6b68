"""The web lab: a local FastAPI server and one static page (vanilla JS + SVG, no CDN).

Every number the page shows is computed on the server by gptlab's own code
(`gptlab.attention`, `gptlab.positional`, `gptlab.params`, `gptlab.interp`), so what the
learner sees is what the model does. `create_app(runs_dir)` builds the app; `serve` runs it.
"""
