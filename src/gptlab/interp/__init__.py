"""Looking inside a model: hooks (attention patterns and forward hooks), heads (head
scores and ablation), residuals (the residual stream, split by its writers), lens (the
logit lens), attribution (direct logit attribution), patching (activation patching),
walk (one token through every stage of the model, as the chapter draws it), memory (the
feed-forward network read as key-value memories, Geva et al. 2021), tracing (causal
tracing of facts, Meng et al. 2022) and brackets (heads on Dyck-2: attention to each
closing bracket's match, uniformity, ablation).
"""
