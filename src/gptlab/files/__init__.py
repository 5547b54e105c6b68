"""What gptlab keeps on disk: atomic (every write is atomic), kinds (what a folder holds
and the one rule for writing one) and authorship (whether gptlab wrote a file). Reading and
writing a model directory is gptlab.model_dir, a layer above: it needs the model and the
tokenizer, which write through these modules.
"""
