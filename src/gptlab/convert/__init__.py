"""Other formats, both ways: hf (Hugging Face weights and files), hf_config (configs),
hf_keymap (weight names, as data) and gguf_export (one GGUF file for llama.cpp).
"""
