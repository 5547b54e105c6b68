"""The kinds of head gptlab.interp.heads scores and the ways it ablates a head, by name:
torch-free, so that `gptlab heads --help` lists them without importing torch."""

SCORE_NAMES = ("previous_token", "duplicate_token", "induction")
ABLATION_MODES = ("zero", "mean")
