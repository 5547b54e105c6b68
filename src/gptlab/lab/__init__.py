"""The web lab: a local FastAPI server and one static page (vanilla JS + SVG, no CDN).

Every number the page shows is computed on the server by gptlab's own code
(`gptlab.model.attention`, `gptlab.model.positional`, `gptlab.model.params`,
`gptlab.interp`), so what the learner sees is what the model does. `create_app(runs_dir)`
builds the app; `serve` runs it.

What every area shares, here:
  server        the app: composes the areas' routers (ROUTERS), errors as 400s, the guard,
                the page and /static
  state         the runs folder, as the FastAPI dependency RunsDep
  fields        the field types and limits every body shares; a failed check as one line
  responses     what the answers share: the error, the start of an answer about a run, a
                slot's event stream
  runs          the runs folder, kept inside its root; loaded models and their lock
Who it answers (gptlab.web.guard: its own Host names, its own page's Origin, a token beyond
loopback) and how its routes check bodies (gptlab.web.body) are shared with `gptlab serve`.

One folder per area, each the same way: `routes` (its APIRouter, `router`), `schemas` (its
bodies and answers), and beside them modules named for what they compute, one per view
where the area holds several:
  calculator    views 1, 2, 4, 5 and the quiz (7), no run needed: attention, scaling,
                positions, params, quiz, and compute (their arithmetic)
  model         views 3, 6, 12 and 13 and view 4's learned positions, on a run: heads,
                scores, wholemodel, layersteps, allheads, learnedpos, picker (the runs to
                pick from), tokens (what these views share)
  prediction    views 8 and 10, what a run predicts: nexttoken, lens
  live          view 9, watch it learn: training, tasks, estimate
  context       view 11, longer than trained: window, results
  features      view 15, a sparse dictionary's features: dictionary
  experiments   view 14 and the quick runs of views 11 and 14: report, quickrun
"""
