"""Experiments: a question the chapter raises, answered by training a small grid of models
and measuring them, in one command (`gptlab experiment NAME`).

Each experiment is a module here (context: positions past the training length; norm: Pre-LN
against Post-LN; scale: attention with and without 1/sqrt(d_k)), with `run(out, ...)`,
`tables(results)`, TITLE and FIGURES, listed by `catalog` (which the CLI and the lab read
them through); what they share lives beside them: `grid` (the experiment's folder, and its
runs trained once and cached), `report` (results.json, the Markdown report, the tables, seed
spreads and the timing) and `probes` (what is measured on a model while it trains: gradient
norms, attention entropy and saturation). `tracing` is memory's facts part (models trained
on invented facts, traced as ROME).
"""
