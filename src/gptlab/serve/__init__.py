"""`gptlab serve`: any model gptlab.load takes behind OpenAI's API (/v1/models,
/v1/completions, /v1/chat/completions), streamed as server-sent events, decoded with
continuous batching.

One module per concern:
  app        the FastAPI app (routes, errors, the guard of gptlab.web), open_model (a model
             loaded as `gptlab sample` loads it), BackgroundServer, serve
  routes     the routes, and how a request's events become OpenAI's answers and chunks
  schemas    the request bodies as OpenAI defines them; fields gptlab cannot honour refused
  served     the model served and the checks every request passes before it is queued
  answers    the answers' JSON: choices, log-probabilities, usage
  errors     OpenAI's error object for every failure, with its status code
  chat       chat templates: found where Hugging Face keeps them, rendered by transformers
  scheduler  continuous batching: prefill alone, one batched decode step for every row
  slots      SlotCache, the KV cache whose rows hold texts of different lengths
  bridge     the scheduler thread's events handed to the event loop in batches
"""
