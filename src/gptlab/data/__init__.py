"""Text in, token files out: text (reading and splitting text), corpus (the embedded
Shakespeare), download (a URL into the cache, checksummed), tokenizer (character and BPE),
prepared (a data directory: `prepare` writes it, `load_data` reads it) and batches (the
random streams the trainer draws from). Made-up texts: synthetic (repeated random segments)
and facts (invented entities' attributes, for causal tracing).
"""
