"""Training: config (TrainConfig), recipes (named settings), run (`train()`, the GPT glue),
trainer (the loop, which knows nothing of GPT), optim (AdamW groups and Muon), muon,
schedule (the learning rate as a function of the step), precision (what dtype 'auto' means
on this machine), rundir (a run directory: its lock, files and checkpoints) and reporting
(where progress goes).

Nothing is imported here: `gptlab.training.config` must load without torch, for the CLI.
"""
