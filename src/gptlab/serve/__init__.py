"""gptlab serve: an OpenAI-compatible server (see gptlab.serve.app)."""
