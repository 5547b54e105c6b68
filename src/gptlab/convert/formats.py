"""What the converters write, by name, and the extra each needs: torch-free, so that
`gptlab convert --help` lists them without importing torch."""

HF_HINT = "pip install 'gptlab[hf]'"  # transformers, for convert.hf
GGUF_HINT = "pip install 'gptlab[gguf]'"  # the gguf writer, for convert.gguf_export
GGUF_DTYPES = ("f32", "f16", "q8_0")  # the weight types convert.gguf_export writes
