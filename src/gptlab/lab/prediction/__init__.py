"""The views of what a run predicts: the next token, filter by filter (view 8), and the
logit lens, the prediction after each block with its direct logit attribution (view 10)."""
