"""Tiny ONNX models with known outputs, written as ``optimum-cli export onnx`` would.

``ragpulse demo --judge nli --model tiny`` builds one so a user sees the whole path of
a model judge (scores, evidence, the report) before exporting a real model; the test
suite and ``bench/local_judge_speed.py`` build the same ones. No weights are shipped
and none are downloaded: each model is a few ``onnx.helper`` nodes over a
``tokenizers`` WordLevel vocabulary built from the words it will read, so loading,
evidence selection, batching, label mapping and offsets run for real through
``onnxruntime``. Its judgement is word overlap, not meaning: it shows the mechanics,
never a model's accuracy. It needs the ``onnx`` package (the ``local`` extra).
What each model computes:

- ``write_nli_model``: a sequence classifier over a (premise, hypothesis) pair.
  Entailment when every hypothesis word occurs in the premise; contradiction when
  the premise holds the word ``denied``; neutral otherwise (logits 5 / 5 / 2.5).
  Padding is masked out: the pad token's own row would score contradiction, so a
  batch whose mask were ignored would show it. The logits pass through one MatMul
  with a constant (identity) weight, the kind of node int8 dynamic quantization
  rewrites, so a quantized copy (``quantize``) computes the same verdicts.
- ``write_token_model``: a token classifier over (passages, answer). An answer token
  is ``supported`` (class 0) when the same word occurs in the first sequence,
  ``hallucinated`` (class 1) otherwise.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from tokenizers import Tokenizer, models, pre_tokenizers, processors

SPECIAL = ("[PAD]", "[UNK]", "[CLS]", "[SEP]")
PAD, UNK, CLS, SEP = range(4)
DENIED = "denied"
_WORD = re.compile(r"\w+|[^\w\s]")


def vocabulary(texts: Iterable[str]) -> dict[str, int]:
    """The special tokens, then every word and punctuation mark of ``texts``, lowercased."""
    words = sorted({w.lower() for text in texts for w in _WORD.findall(text)} | {DENIED})
    return {token: i for i, token in enumerate([*SPECIAL, *words])}


def write_tokenizer(directory: Path, vocab: Mapping[str, int]) -> Tokenizer:
    """A lowercasing WordLevel tokenizer with BERT's pair layout, saved as tokenizer.json."""
    from tokenizers import normalizers

    tokenizer = Tokenizer(models.WordLevel(dict(vocab), unk_token="[UNK]"))
    tokenizer.normalizer = normalizers.Lowercase()
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.Whitespace(), pre_tokenizers.Punctuation()]
    )
    tokenizer.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]",
        pair="[CLS] $A:0 [SEP]:0 $B:1 [SEP]:1",
        special_tokens=[("[CLS]", CLS), ("[SEP]", SEP)],
    )
    directory.mkdir(parents=True, exist_ok=True)
    tokenizer.save(str(directory / "tokenizer.json"))
    return tokenizer


TINY_NAME = "ragpulse/tiny-word-overlap"
"""The ``_name_or_path`` the tiny models' config.json carries."""


def write_config(
    directory: Path,
    id2label: Mapping[int, str],
    *,
    max_length: int,
    model_type: str = "bert",
    name: str = TINY_NAME,
) -> None:
    """config.json (name, labels, positions, pad id, size) and tokenizer_config.json."""
    config = {
        "_name_or_path": name,
        "model_type": model_type,
        "id2label": {str(k): v for k, v in id2label.items()},
        "label2id": {v: k for k, v in id2label.items()},
        "max_position_embeddings": max_length,
        "pad_token_id": PAD,
        # What a cost estimate reads: one layer, eight wide (it computes next to nothing).
        "num_hidden_layers": 1,
        "hidden_size": 8,
        "intermediate_size": 8,
    }
    (directory / "config.json").write_text(json.dumps(config), encoding="utf-8")
    (directory / "tokenizer_config.json").write_text(
        json.dumps({"model_max_length": max_length}), encoding="utf-8"
    )


def _inputs(names: Sequence[str]) -> list[onnx.ValueInfoProto]:
    return [helper.make_tensor_value_info(n, TensorProto.INT64, ["batch", "seq"]) for n in names]


def _save(
    directory: Path,
    nodes: list[onnx.NodeProto],
    inputs: Sequence[str],
    output: onnx.ValueInfoProto,
    initializers: list[onnx.TensorProto],
) -> None:
    graph = helper.make_graph(nodes, "tiny", _inputs(inputs), [output], initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, str(directory / "model.onnx"))


def _pair_nodes() -> tuple[list[onnx.NodeProto], list[onnx.TensorProto]]:
    """Nodes computing ``present[b, i]``: token i's id occurs among the first sequence's tokens.

    Inputs input_ids, attention_mask, token_type_ids; also ``first[b, j]`` (1.0 for real
    first-sequence tokens), ``second[b, i]`` (1.0 for real second-sequence tokens).
    """
    one = numpy_helper.from_array(np.array(1.0, dtype=np.float32), "one")
    axes2 = numpy_helper.from_array(np.array([2], dtype=np.int64), "axes2")
    axes1 = numpy_helper.from_array(np.array([1], dtype=np.int64), "axes1")
    nodes = [
        helper.make_node("Cast", ["attention_mask"], ["mask"], to=TensorProto.FLOAT),
        helper.make_node("Cast", ["token_type_ids"], ["types"], to=TensorProto.FLOAT),
        helper.make_node("Sub", ["one", "types"], ["is_first"]),
        helper.make_node("Mul", ["is_first", "mask"], ["first"]),
        helper.make_node("Mul", ["types", "mask"], ["second"]),
        # same[b, i, j] = ids[b, i] == ids[b, j]
        helper.make_node("Unsqueeze", ["input_ids", "axes2"], ["ids_i"]),
        helper.make_node("Unsqueeze", ["input_ids", "axes1"], ["ids_j"]),
        helper.make_node("Equal", ["ids_i", "ids_j"], ["same_bool"]),
        helper.make_node("Cast", ["same_bool"], ["same"], to=TensorProto.FLOAT),
        helper.make_node("Unsqueeze", ["first", "axes1"], ["first_j"]),
        helper.make_node("Mul", ["same", "first_j"], ["hits"]),
        helper.make_node("ReduceMax", ["hits"], ["present"], axes=[2], keepdims=0),
    ]
    return nodes, [one, axes1, axes2]


def write_nli_model(
    directory: Path,
    texts: Iterable[str],
    *,
    labels: Sequence[str] = ("contradiction", "entailment", "neutral"),
    max_length: int = 64,
    model_type: str = "bert",
) -> Path:
    """The NLI model of the module doc, its classes in the order ``labels`` names them.

    ``labels`` lists names for the roles contradiction, entailment, neutral in output order
    given by their position: label i is written at output index i, and the role of each
    index is read from the name's meaning (so any order and case may be tested).
    """
    vocab = vocabulary(texts)
    write_tokenizer(directory, vocab)
    write_config(directory, dict(enumerate(labels)), max_length=max_length, model_type=model_type)
    roles = [_role(name) for name in labels]
    nodes, initializers = _pair_nodes()
    is_denied = np.zeros((len(vocab),), dtype=np.float32)
    is_denied[vocab[DENIED]] = 1.0
    is_denied[PAD] = 1.0  # the pad row says contradiction: masking must hide it
    initializers.append(numpy_helper.from_array(is_denied, "is_denied"))
    initializers.append(numpy_helper.from_array(np.array(5.0, dtype=np.float32), "five"))
    initializers.append(numpy_helper.from_array(np.array(2.5, dtype=np.float32), "half"))
    nodes += [
        # entailment: every hypothesis token present in the premise
        helper.make_node("Sub", ["one", "second"], ["not_second"]),
        helper.make_node("Mul", ["present", "second"], ["present_second"]),
        helper.make_node("Add", ["present_second", "not_second"], ["covered"]),
        helper.make_node("ReduceMin", ["covered"], ["all_covered"], axes=[1], keepdims=1),
        helper.make_node("Mul", ["all_covered", "five"], ["entail"]),
        # contradiction: the premise holds "denied" (counted only where the mask is 1)
        helper.make_node("Gather", ["is_denied", "input_ids"], ["denied_at"], axis=0),
        helper.make_node("Mul", ["denied_at", "first"], ["denied_first"]),
        helper.make_node("ReduceMax", ["denied_first"], ["any_denied"], axes=[1], keepdims=1),
        helper.make_node("Mul", ["any_denied", "five"], ["contra"]),
        helper.make_node("Mul", ["all_covered", "zero_like"], ["zeros"]),
        helper.make_node("Add", ["zeros", "half"], ["neutral"]),
    ]
    initializers.append(numpy_helper.from_array(np.array(0.0, dtype=np.float32), "zero_like"))
    by_role = {"contradiction": "contra", "entailment": "entail", "neutral": "neutral"}
    nodes.append(helper.make_node("Concat", [by_role[r] for r in roles], ["raw"], axis=1))
    identity = np.eye(len(labels), dtype=np.float32)
    initializers.append(numpy_helper.from_array(identity, "head"))
    nodes.append(helper.make_node("MatMul", ["raw", "head"], ["logits"]))
    output = helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", len(labels)])
    _save(directory, nodes, ("input_ids", "attention_mask", "token_type_ids"), output, initializers)
    return directory


def _role(name: str) -> str:
    text = name.lower()
    for role in ("contradiction", "entailment", "neutral"):
        if role[:6] in text:
            return role
    raise ValueError(f"test label {name!r} names no role")


def write_binary_model(directory: Path, texts: Iterable[str], *, max_length: int = 64) -> Path:
    """The NLI model's entailment test as a binary classifier labelled LABEL_0/LABEL_1.

    Class 1 (supported) scores 5 when every hypothesis word is in the premise, class 0
    (unsupported) a constant 2.5: it needs a label map such as ``1=supported``.
    """
    vocab = vocabulary(texts)
    write_tokenizer(directory, vocab)
    write_config(directory, {0: "LABEL_0", 1: "LABEL_1"}, max_length=max_length)
    nodes, initializers = _pair_nodes()
    initializers.append(numpy_helper.from_array(np.array(5.0, dtype=np.float32), "five"))
    initializers.append(numpy_helper.from_array(np.array(2.5, dtype=np.float32), "half"))
    initializers.append(numpy_helper.from_array(np.array(0.0, dtype=np.float32), "zero"))
    nodes += [
        helper.make_node("Sub", ["one", "second"], ["not_second"]),
        helper.make_node("Mul", ["present", "second"], ["present_second"]),
        helper.make_node("Add", ["present_second", "not_second"], ["covered"]),
        helper.make_node("ReduceMin", ["covered"], ["all_covered"], axes=[1], keepdims=1),
        helper.make_node("Mul", ["all_covered", "five"], ["supported"]),
        helper.make_node("Mul", ["all_covered", "zero"], ["zeros"]),
        helper.make_node("Add", ["zeros", "half"], ["unsupported"]),
        helper.make_node("Concat", ["unsupported", "supported"], ["logits"], axis=1),
    ]
    output = helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", 2])
    _save(directory, nodes, ("input_ids", "attention_mask", "token_type_ids"), output, initializers)
    return directory


def write_token_model(
    directory: Path,
    texts: Iterable[str],
    *,
    labels: Sequence[str] = ("supported", "hallucinated"),
    max_length: int = 64,
) -> Path:
    """The token classifier of the module doc: class 1 for answer words the passages lack."""
    vocab = vocabulary(texts)
    write_tokenizer(directory, vocab)
    write_config(directory, dict(enumerate(labels)), max_length=max_length)
    nodes, initializers = _pair_nodes()
    initializers.append(numpy_helper.from_array(np.array(5.0, dtype=np.float32), "five"))
    axes = numpy_helper.from_array(np.array([2], dtype=np.int64), "axes_last")
    initializers.append(axes)
    nodes += [
        helper.make_node("Mul", ["present", "five"], ["supported_2d"]),
        helper.make_node("Sub", ["one", "present"], ["absent"]),
        helper.make_node("Mul", ["absent", "five"], ["hallucinated_2d"]),
        helper.make_node("Unsqueeze", ["supported_2d", "axes_last"], ["supported"]),
        helper.make_node("Unsqueeze", ["hallucinated_2d", "axes_last"], ["hallucinated"]),
        helper.make_node("Concat", ["supported", "hallucinated"], ["logits"], axis=2),
    ]
    output = helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", "seq", 2])
    _save(directory, nodes, ("input_ids", "attention_mask", "token_type_ids"), output, initializers)
    return directory


def write_graph_with_inputs(directory: Path, inputs: Sequence[str]) -> None:
    """Replace model.onnx by a graph declaring ``inputs`` (to test what ragpulse refuses)."""
    nodes = [helper.make_node("Cast", [inputs[0]], ["as_float"], to=TensorProto.FLOAT)]
    nodes.append(helper.make_node("ReduceMax", ["as_float"], ["peak"], axes=[1], keepdims=1))
    nodes.append(helper.make_node("Concat", ["peak", "peak", "peak"], ["logits"], axis=1))
    output = helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", 3])
    _save(directory, nodes, inputs, output, [])


def quantize(source: Path, target: Path) -> Path:
    """An int8 copy of the model directory ``source`` at ``target``, made as the docs say:
    ``onnxruntime.quantization.quantize_dynamic`` with int8 weights, the other files copied."""
    import shutil

    from onnxruntime.quantization import QuantType, quantize_dynamic

    target.mkdir(parents=True, exist_ok=True)
    for name in ("tokenizer.json", "config.json", "tokenizer_config.json"):
        if (source / name).is_file():
            shutil.copyfile(source / name, target / name)
    quantize_dynamic(
        str(source / "model.onnx"), str(target / "model.onnx"), weight_type=QuantType.QInt8
    )
    return target


def build_tiny(kind: str, texts: Iterable[str], directory: Path) -> Path:
    """The tiny ``nli`` or ``tokens`` model over the words of ``texts``, in ``directory``.

    A word it never saw reads as unknown, which no passage holds: the model calls it
    unsupported, as a real model would a word no passage states.
    """
    words = list(texts)
    if kind == "nli":
        return write_nli_model(directory, words, max_length=256)
    if kind == "tokens":
        return write_token_model(directory, words, max_length=512)
    raise ValueError(f"no tiny model for the {kind} judge; use nli or tokens")
