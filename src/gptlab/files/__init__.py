"""What gptlab keeps on disk: atomic (every write is atomic) and model_dir (a model
directory: config.json, model.safetensors, tokenizer.json).
"""
