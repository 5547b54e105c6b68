"""Training: config (TrainConfig), recipes (named settings), plan (what a `train()` call will
do, decided first), run (`train()` carrying the plan out, the GPT glue),
trainer (the loop, which knows nothing of GPT), optim (AdamW groups and Muon), muon,
schedule (the learning rate as a function of the step), precision (what dtype 'auto' means
on this machine), rundir (a run directory: its lock, files and checkpoints) and reporting
(where progress goes, and only that).

Nothing is imported here: `gptlab.training.config` must load without torch, for the CLI.
"""
