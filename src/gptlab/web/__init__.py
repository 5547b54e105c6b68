"""What gptlab's two local servers share, the lab (gptlab.lab) and `gptlab serve`
(gptlab.serve):

  guard   who they answer: their own Host names, no other site's page (Origin), a token
          beyond loopback (one ASGI middleware in front of everything)
  body    the route class of every router: bodies small, on time, sent as JSON
  threaded  where they listen: a port checked before uvicorn takes it, a free port, an
          app served from a thread (tests, screenshots, benchmarks)
"""
