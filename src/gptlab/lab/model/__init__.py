"""The views that look into a run: its heads (view 3), its learned positions (view 4's
table), head scores and ablation (view 6), the whole model for one token and one block step
by step (view 12), every head at a glance (view 13), and the runs a view's picker offers."""
