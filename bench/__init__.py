"""gptlab benchmarks: each prints medians over interleaved runs and the ratio against a peer
measured in the same run, and writes its numbers to JSON. Run them from a source checkout
with `python -m bench` (or `make bench`)."""
