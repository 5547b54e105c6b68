"""Text in, token files out: text (reading and splitting text), corpus (the embedded
Shakespeare), made-up texts (synthetic: repeated random segments; dyck: Dyck-2 brackets;
facts: invented entities' attributes, for causal tracing), download (a URL into the cache,
checksummed), tokenizer (character and BPE), prepared (a data directory: `prepare` writes
it, `load_data` reads it) and batches (the random streams the trainer draws from).
"""
