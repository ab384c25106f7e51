"""The tiny ONNX models the tests build: ``ragpulse.demo.tiny_model``, which the demo
also builds for a user (``ragpulse demo --judge nli --model tiny``)."""

from ragpulse.demo.tiny_model import (
    CLS,
    DENIED,
    PAD,
    SEP,
    SPECIAL,
    TINY_NAME,
    UNK,
    quantize,
    vocabulary,
    write_binary_model,
    write_config,
    write_graph_with_inputs,
    write_nli_model,
    write_token_model,
    write_tokenizer,
)

__all__ = [
    "CLS",
    "DENIED",
    "PAD",
    "SEP",
    "SPECIAL",
    "TINY_NAME",
    "UNK",
    "quantize",
    "vocabulary",
    "write_binary_model",
    "write_config",
    "write_graph_with_inputs",
    "write_nli_model",
    "write_token_model",
    "write_tokenizer",
]
