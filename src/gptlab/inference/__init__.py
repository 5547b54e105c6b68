"""Using a trained model: sampling (text with stop strings, streamed), evaluate
(sliding-window loss, perplexity and bits per character) and quantize (decoding weights in
fp32, fp16, bf16 or int8, chosen by a probe).
"""
