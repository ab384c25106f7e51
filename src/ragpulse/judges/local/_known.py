"""The models the docs recommend, by name: what each expects, checked when it is loaded.

An ``optimum-cli export onnx`` directory keeps the hub id it was exported from in
config.json's ``_name_or_path``. For a model named here, ragpulse checks that the
export fits what the judge feeds it and reads from it: the judge it is for, its class
names by output index (``id2label``, as the model's own config.json on the hub
publishes them), which class means "supported" for a binary model (applied when
config.json gives only ``LABEL_0``/``LABEL_1``), and, for a token classifier, the
layout of its first sequence. A directory whose labels contradict its model's is
refused with one line naming config.json; a model not named here gets the general
checks only (``NLIJudge._read_labels``, ``TokenJudge._read_labels``).

Every judge here feeds a pair: the premise first (passage sentences), the hypothesis
second (a claim), as the NLI cross-encoders and MiniCheck were trained; the token
judge gives the passages and question first, the answer second, as LettuceDetect.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass

__all__ = ["KNOWN_MODELS", "KnownModel", "generic", "known_model", "known_problem"]

NLI_LABELS = ("contradiction", "entailment", "neutral")
_GENERIC = re.compile(r"label_\d+")

LETTUCEDETECT_TEMPLATE = (
    "Briefly answer the following question:\n{question}\n"
    "Bear in mind that your response should be strictly based on the following passages:\n"
    "{contexts}\noutput:"
)
"""LettuceDetect's first sequence (its README's example prompt: the RAGTruth QA prompt),
the passages joined by blank lines rather than numbered."""


@dataclass(frozen=True)
class KnownModel:
    """A model the docs recommend, as published."""

    hub_id: str
    judge: str
    """``nli`` or ``tokens``."""
    labels: tuple[str, ...]
    """``id2label`` by output index, as the model's config.json on the hub has it."""
    supported: int | None = None
    """A binary model's "supported" class; None for a 3-way NLI model."""
    unsupported: int | None = None
    """A token classifier's "unsupported" class."""
    template: str | None = None
    """A token classifier's first-sequence layout (``TokenJudge(template=...)``)."""

    @property
    def label_map(self) -> dict[int, str]:
        """What the judge reads the classes as, where config.json names them generically."""
        if self.supported is not None:
            return {i: "supported" if i == self.supported else "unsupported" for i in range(2)}
        if self.unsupported is not None:
            return {i: "hallucinated" if i == self.unsupported else "supported" for i in range(2)}
        return dict(enumerate(self.labels))


KNOWN_MODELS: Mapping[str, KnownModel] = {
    model.hub_id.lower(): model
    for model in (
        KnownModel("cross-encoder/nli-deberta-v3-xsmall", "nli", NLI_LABELS),
        KnownModel("cross-encoder/nli-deberta-v3-base", "nli", NLI_LABELS),
        KnownModel("cross-encoder/nli-deberta-v3-large", "nli", NLI_LABELS),
        # MiniCheck's encoders: two classes, 1 = the document supports the claim.
        KnownModel("lytang/MiniCheck-DeBERTa-v3-Large", "nli", ("LABEL_0", "LABEL_1"), 1),
        KnownModel("lytang/MiniCheck-RoBERTa-Large", "nli", ("LABEL_0", "LABEL_1"), 1),
        # LettuceDetect: per answer token, class 1 = hallucinated.
        KnownModel(
            "KRLabsOrg/lettucedect-base-modernbert-en-v1",
            "tokens",
            ("LABEL_0", "LABEL_1"),
            unsupported=1,
            template=LETTUCEDETECT_TEMPLATE,
        ),
        KnownModel(
            "KRLabsOrg/lettucedect-large-modernbert-en-v1",
            "tokens",
            ("LABEL_0", "LABEL_1"),
            unsupported=1,
            template=LETTUCEDETECT_TEMPLATE,
        ),
    )
}


def known_model(name: str) -> KnownModel | None:
    """The model a config.json's ``_name_or_path`` names, where it is one of ``KNOWN_MODELS``
    (a local path ending in the hub id counts: ``/cache/cross-encoder/nli-deberta-v3-base``)."""
    key = name.strip().rstrip("/").lower()
    if key in KNOWN_MODELS:
        return KNOWN_MODELS[key]
    tail = "/".join(key.split("/")[-2:])
    return KNOWN_MODELS.get(tail)


def generic(labels: tuple[str, ...]) -> bool:
    """Whether the class names say nothing (``LABEL_0``, ``LABEL_1``...)."""
    return all(_GENERIC.fullmatch(label.strip().lower()) for label in labels)


def known_problem(
    model: KnownModel, judge: str, labels: tuple[str, ...], supports: Callable[[str], bool]
) -> str | None:
    """Why a directory exported from ``model`` does not fit ``judge`` with ``labels`` (its
    config.json's, label map applied); None when it fits. ``supports`` tells a class name
    meaning "supported" (the judge's own reading of names)."""
    if model.judge != judge:
        return (
            f"{model.hub_id} is a {'token' if model.judge == 'tokens' else 'text'}-classification "
            f"model for --judge {model.judge}, not --judge {judge}"
        )
    if len(labels) != len(model.labels):
        return (
            f"{model.hub_id} has {len(model.labels)} classes {list(model.labels)}, but this "
            f"export names {len(labels)}: {list(labels)}; export it again with "
            f"--task {'token' if model.judge == 'tokens' else 'text'}-classification"
        )
    if generic(labels):
        return None
    if model.supported is not None:
        named = [i for i, label in enumerate(labels) if supports(label)]
        if named != [model.supported]:
            return (
                f"the labels {list(labels)} make class {named or 'none'} the supported one, "
                f"but {model.hub_id}'s supported class is {model.supported} (its model card)"
            )
        return None
    if model.unsupported is not None:
        return None  # the token judge reads any class but the first as unsupported
    if [x.lower() for x in labels] != [x.lower() for x in model.labels]:
        return (
            f"its id2label {list(labels)} is not {model.hub_id}'s {list(model.labels)} "
            "(in that order); the export's classes are not the model's, so its "
            "probabilities would be read as the wrong verdicts"
        )
    return None
