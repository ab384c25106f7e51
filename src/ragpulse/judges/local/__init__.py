"""The local model judges: an NLI cross-encoder and a token classifier, run with onnxruntime."""
