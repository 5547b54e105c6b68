"""Experiments: a question the chapter raises, answered by training a small grid of models
and measuring them, in one command (`gptlab experiment NAME`).

Each experiment is a module here (context: positions past the training length); what they
share lives beside them: `grid` (the experiment's folder, and its runs trained once and
cached) and `report` (results.json, the Markdown report, the tables and the timing).
"""
