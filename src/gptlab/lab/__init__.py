"""The web lab: a local FastAPI server and one static page (vanilla JS + SVG, no CDN).

Every number the page shows is computed on the server by gptlab's own code
(`gptlab.model.attention`, `gptlab.model.positional`, `gptlab.model.params`, `gptlab.interp.heads`),
so what the learner sees is what the model does. `create_app(runs_dir)` builds the app; `serve` runs
it.

One module per concern:
  server     HTTP: the routes, the body checks (size, JSON only), errors as 400s
  models     request bodies and their limits; a failed check as one line
  responses  the answers' schemas
  api        one view per route: a checked body in, a JSON-ready answer out
  compute    the arithmetic of the views that need no run, shared with the quiz
  quiz       questions from (kind, seed), answers recomputed when checked
  runs       the runs folder, kept inside its root; loaded models and their lock
"""
