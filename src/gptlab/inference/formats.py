"""The decoding weight formats, by name (see gptlab.inference.quantize). Torch-free, so the
CLI lists them, and gptlab.load checks a `weights=` value, without importing torch."""

FORMATS = ("fp32", "fp16", "bf16", "int8")
WEIGHT_CHOICES = (*FORMATS, "auto")  # auto: the fastest format on this machine, probed
