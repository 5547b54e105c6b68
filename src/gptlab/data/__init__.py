"""Text in, token files out: text (reading and splitting text), corpus (the embedded
Shakespeare), synthetic and dyck (generated tasks: repeated random segments, Dyck-2
brackets), download (a URL into the cache, checksummed), tokenizer (character and BPE),
prepared (a data directory: `prepare` writes it, `load_data` reads it) and batches (the
random streams the trainer draws from).
"""
