"""The web lab: a local FastAPI server and one static page (vanilla JS + SVG, no CDN).

Every number the page shows is computed on the server by gptlab's own code
(`gptlab.model.attention`, `gptlab.model.positional`, `gptlab.model.params`,
`gptlab.interp`), so what the learner sees is what the model does. `create_app(runs_dir)`
builds the app; `serve` runs it.

One module per concern:
  server        the app: composes the areas' routers (ROUTERS), errors as 400s, the guard,
                the page and /static
  state         what routes share, as FastAPI dependencies: the runs folder, the training slot
Who it answers (gptlab.web.guard) and how its routes check bodies (gptlab.web.body) are
shared with `gptlab serve`.
  One APIRouter per area, its schemas beside it:
  calculator_routes + calculator_schemas   views 1, 2, 4, 5 and the quiz (no run needed)
  model_routes + model_schemas   views 3 and 6, whole model, all heads, learned positions
  play_routes + play_schemas     views 8 and 10 (next token, logit lens)
  live_routes + live_schemas     view 9 (watch it learn)
  contextview, experimentsview   longer than trained, experiments (schemas, routes, views)
  schemas       the field types and limits every body shares; a failed check as one line
  responses     what the answers share: the error, the start of an answer about a run
  api           one view per route: a checked body in, a JSON-ready answer out
  nexttoken, lensview, live (+ live_tasks), wholemodel, allheads, learnedpos   the views
  compute       the arithmetic of the views that need no run, shared with the quiz
  quiz          questions from (kind, seed), answers recomputed when checked
  runs          the runs folder, kept inside its root; loaded models and their lock
"""
