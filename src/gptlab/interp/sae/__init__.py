"""Sparse dictionaries on a gptlab model: sparse autoencoders (Bricken et al. 2023,
"Towards Monosemanticity"; Cunningham et al. 2023) and transcoders (Dunefsky et al. 2024)
trained on a site's activations, measured and read feature by feature.

  config       what a dictionary is and how it trains (SAELens' names), the sites
  autoencoder  the dictionary: encode (ReLU or TopK), decode, unit-norm decoder rows
  sites        reading a site's activations, splicing a replacement in
  stream       activations streamed from the model over a text, batch by batch
  training     the training loop: resampling or the auxiliary loss, checkpoints, resume
  store        cfg.json + sae_weights.safetensors, SAELens' layout
  metrics      L0, explained variance, CE loss recovered, dead and dense features
  features     top contexts, logit effects, activation histograms, the pattern rule
  neurons      the FFN's neuron basis measured the same way, for comparison
"""
