"""The web lab: a local FastAPI server and one static page (vanilla JS + SVG, no CDN).

Every number the page shows is computed on the server by gptlab's own code
(`gptlab.model.attention`, `gptlab.model.positional`, `gptlab.model.params`,
`gptlab.interp`), so what the learner sees is what the model does. `create_app(runs_dir)`
builds the app; `serve` runs it.

One module per concern:
  server        HTTP: the routes, the body checks (size, time, JSON only), errors as 400s
  guard         who it answers: its own Host names, its own page's Origin, a token beyond
                loopback (one ASGI middleware in front of everything)
  play_routes   the routes of views 8-10 (next token, watch it learn, logit lens)
  schemas       request bodies and their limits; a failed check as one line
  play_schemas  the bodies and answers of views 8-10
  responses     the answers' schemas
  api           one view per route: a checked body in, a JSON-ready answer out
  nexttoken, lensview, live (+ live_tasks)   views 8, 10 and 9
  compute       the arithmetic of the views that need no run, shared with the quiz
  quiz          questions from (kind, seed), answers recomputed when checked
  runs          the runs folder, kept inside its root; loaded models and their lock
"""
