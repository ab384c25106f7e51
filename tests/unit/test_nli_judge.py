"""``NLIJudge`` on tiny ONNX models built here: loading, windows, batches, labels, evidence.

The model (``tests/models/tiny_onnx.py``) entails a hypothesis whose every word is in
the premise and contradicts it when the premise says "denied", so each expected
verdict below follows from the text, through the real tokenizer and onnxruntime.
"""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest
from tests.models.tiny_onnx import (
    write_binary_model,
    write_graph_with_inputs,
    write_nli_model,
    write_token_model,
)

from ragpulse import errors
from ragpulse.errors import EvalStatus
from ragpulse.evaluation.evidence import verify
from ragpulse.evaluation.types import (
    CITATION,
    COMPLETENESS,
    CORRECTNESS,
    FAITHFULNESS,
    GROUNDEDNESS,
    Context,
    RagRecord,
    Verdict,
)
from ragpulse.judges.local.nli import NLIJudge
from ragpulse.judging.process import ProcessJudge

MUSEUM = (
    "The museum opens at nine on weekdays. Tickets cost ten euros for adults. "
    "Children under twelve enter free. The gift shop sells postcards and maps. "
    "Guided tours start every hour from the main hall. The garden closes at dusk."
)
PERMIT = "The cafe was denied a permit last spring."
ANSWER = "Tickets cost ten euros for adults. The garden closes at dusk."
OTHER_WORDS = [
    "The garden closes at noon.",
    "The cafe has a permit.",
    "The museum has a roof garden.",
    "What does a ticket cost?",
    "Tickets cost ten euros for adults [1]. The garden closes at dusk [2].",
    "Adults pay ten euros.",
]
TEXTS = [MUSEUM, PERMIT, ANSWER, *OTHER_WORDS]


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_nli_model(tmp_path_factory.mktemp("nli"), TEXTS, max_length=32)


def record(answer: str, *contexts: str, **extra: object) -> RagRecord:
    return RagRecord(
        question=extra.pop("question", None),  # type: ignore[arg-type]
        contexts=tuple(Context(c) for c in contexts),
        answer=answer,
        **extra,  # type: ignore[arg-type]
    )


def test_supported_claim_quotes_the_sentence_that_states_it_with_real_offsets(
    model_dir: Path,
) -> None:
    judged = NLIJudge(model_dir).evaluate_sync(record("Tickets cost ten euros for adults.", MUSEUM))
    [claim] = judged.claims
    assert claim.verdict is Verdict.SUPPORTED
    assert claim.evidence is not None
    assert claim.evidence.text == "Tickets cost ten euros for adults."
    assert MUSEUM[claim.evidence.start : claim.evidence.end] == claim.evidence.text
    assert verify(claim.quote, (Context(MUSEUM),), 0) == claim.evidence
    assert judged.score(GROUNDEDNESS) == 1.0


def test_a_passage_longer_than_the_model_is_read_in_windows(model_dir: Path) -> None:
    # max_length 32 holds about two sentences with the claim: the garden's sentence is
    # only in the last window, and the whole passage does not fit one.
    judge = NLIJudge(model_dir)
    assert len(judge.model.tokenizer.encode(MUSEUM).ids) > 32
    judged = judge.evaluate_sync(record("The garden closes at dusk.", MUSEUM))
    [claim] = judged.claims
    assert claim.verdict is Verdict.SUPPORTED
    assert claim.evidence is not None and claim.evidence.text == "The garden closes at dusk."


def test_a_claim_whose_words_span_two_distant_windows_is_not_found(model_dir: Path) -> None:
    # "museum" is in the first sentence, "garden" in the last: no window holds both.
    judged = NLIJudge(model_dir).evaluate_sync(record("The museum has a roof garden.", MUSEUM))
    [claim] = judged.claims
    assert claim.verdict is Verdict.NOT_FOUND
    assert claim.evidence is None


def test_a_window_that_contradicts_makes_the_claim_contradicted_with_its_sentence(
    model_dir: Path,
) -> None:
    judged = NLIJudge(model_dir).evaluate_sync(record("The cafe has a permit.", MUSEUM, PERMIT))
    [claim] = judged.claims
    assert claim.verdict is Verdict.CONTRADICTED
    assert claim.evidence is not None and claim.evidence.context_index == 1
    assert claim.evidence.text == PERMIT


def test_each_verdict_carries_the_model_probability_as_confidence(model_dir: Path) -> None:
    judged = NLIJudge(model_dir).evaluate_sync(
        record("For adults tickets cost ten euros. " + OTHER_WORDS[2], MUSEUM)
    )
    supported, missing = judged.claims
    # Logits 5 (entailment), 2.5 (neutral), 0 (contradiction): softmax of the winner.
    import math

    total = math.exp(5) + math.exp(2.5) + math.exp(0)
    assert supported.confidence == pytest.approx(math.exp(5) / total)
    assert missing.verdict is Verdict.NOT_FOUND
    assert missing.confidence == pytest.approx(1 - math.exp(0) / (math.exp(0) + math.exp(2.5) + 1))


def test_padding_in_a_batch_is_masked_and_results_do_not_depend_on_batch_size(
    model_dir: Path,
) -> None:
    # The pad token's row says "contradiction": were the mask not fed, the shorter pairs
    # of a batch would come out contradicted.
    answer = (
        "Tickets cost ten euros for adults. The garden closes at dusk. The garden closes at noon."
    )
    one = NLIJudge(model_dir, batch_size=1).evaluate_sync(record(answer, MUSEUM))
    many = NLIJudge(model_dir, batch_size=16).evaluate_sync(record(answer, MUSEUM))
    verdicts = [c.verdict for c in many.claims]
    assert verdicts == [Verdict.SUPPORTED, Verdict.SUPPORTED, Verdict.NOT_FOUND]
    assert verdicts == [c.verdict for c in one.claims]
    assert [c.confidence for c in many.claims] == pytest.approx([c.confidence for c in one.claims])


@pytest.mark.parametrize(
    "labels",
    [
        ("contradiction", "entailment", "neutral"),
        ("ENTAILMENT", "Neutral", "CONTRADICTION"),
        ("neutral", "contradiction", "entailment"),
    ],
)
def test_nli_labels_are_read_in_any_order_and_case(tmp_path: Path, labels: tuple[str, ...]) -> None:
    directory = write_nli_model(tmp_path, TEXTS, labels=labels, max_length=32)
    judged = NLIJudge(directory).evaluate_sync(
        record("Tickets cost ten euros for adults. The cafe has a permit.", MUSEUM, PERMIT)
    )
    assert [c.verdict for c in judged.claims] == [Verdict.SUPPORTED, Verdict.CONTRADICTED]


def test_a_binary_model_runs_with_a_label_map(tmp_path: Path) -> None:
    directory = write_binary_model(tmp_path, TEXTS, max_length=32)
    judged = NLIJudge(directory, label_map="1=supported").evaluate_sync(
        record("Tickets cost ten euros for adults. The cafe has a permit.", MUSEUM, PERMIT)
    )
    assert [c.verdict for c in judged.claims] == [Verdict.SUPPORTED, Verdict.NOT_FOUND]
    assert judged.score(FAITHFULNESS) == 0.5


def test_labels_it_cannot_map_make_the_judge_unavailable_with_the_file_named(
    tmp_path: Path,
) -> None:
    directory = write_binary_model(tmp_path, TEXTS)
    judge = NLIJudge(directory)
    assert judge.problem is not None
    assert str(directory / "config.json") in judge.problem
    assert "LABEL_0" in judge.problem and "1=supported" in judge.problem
    judged = judge.evaluate_sync(record(ANSWER, MUSEUM))
    assert judged.status is EvalStatus.ERROR
    assert judged.error_type == errors.JUDGE_UNAVAILABLE
    assert judged.explanation == judge.problem


def test_a_directory_that_does_not_exist_says_how_to_export_one(tmp_path: Path) -> None:
    judge = NLIJudge(tmp_path / "cross-encoder-nli")
    assert judge.problem is not None
    assert "does not exist" in judge.problem and "optimum-cli export onnx" in judge.problem
    assert "\n" not in judge.problem


def test_a_hub_model_id_is_never_downloaded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    judge = NLIJudge("cross-encoder/nli-deberta-v3-small")
    assert judge.problem is not None and "downloads nothing" in judge.problem
    assert "--task text-classification" in judge.problem


@pytest.mark.parametrize("missing", ["model.onnx", "tokenizer.json", "config.json"])
def test_a_missing_file_is_named(tmp_path: Path, missing: str) -> None:
    directory = write_nli_model(tmp_path, TEXTS)
    (directory / missing).unlink()
    judge = NLIJudge(directory)
    assert judge.problem is not None
    assert judge.problem.startswith(f"{directory / missing}: missing")


def test_a_graph_asking_for_inputs_it_cannot_feed_is_refused(tmp_path: Path) -> None:
    directory = write_nli_model(tmp_path, TEXTS)
    write_graph_with_inputs(directory, ["input_ids", "pixel_values"])
    judge = NLIJudge(directory)
    assert judge.problem is not None
    assert str(directory / "model.onnx") in judge.problem and "pixel_values" in judge.problem


def test_a_graph_without_token_type_ids_is_fed_only_what_it_declares(tmp_path: Path) -> None:
    directory = write_nli_model(tmp_path, TEXTS)
    write_graph_with_inputs(directory, ["input_ids", "attention_mask"])
    judge = NLIJudge(directory)
    assert judge.problem is None
    assert judge.evaluate_sync(record(ANSWER, MUSEUM)).status is EvalStatus.OK


def test_a_token_classifier_is_refused_as_an_nli_model(tmp_path: Path) -> None:
    directory = write_token_model(
        tmp_path, TEXTS, labels=("entailment", "neutral", "contradiction")
    )
    judge = NLIJudge(directory)
    assert judge.problem is not None and "text-classification" in judge.problem


def test_correctness_reads_the_answer_against_the_reference(model_dir: Path) -> None:
    judged = NLIJudge(model_dir).evaluate_sync(
        record(
            "Tickets cost ten euros for adults. The garden closes at noon.",
            MUSEUM,
            reference="Adults pay ten euros. Tickets cost ten euros for adults.",
        ),
        (CORRECTNESS,),
    )
    # Precision: the first claim is entailed by the reference, the second neither way
    # (agreement mode leaves it out); recall: "Adults pay ten euros." is not in the answer.
    assert judged.score(CORRECTNESS) == pytest.approx(2 * 1.0 * 0.5 / 1.5)
    assert [c.verdict for c in judged.reference_claims] == [Verdict.NOT_FOUND, Verdict.SUPPORTED]


def test_completeness_reads_each_rubric_item_against_the_answer(model_dir: Path) -> None:
    judged = NLIJudge(model_dir).evaluate_sync(
        record(ANSWER, MUSEUM, rubric=("Adults pay ten euros.", "The garden closes at dusk.")),
        (COMPLETENESS,),
    )
    assert judged.score(COMPLETENESS) == 0.5
    assert [p.verdict for p in judged.required_points] == [Verdict.NOT_FOUND, Verdict.SUPPORTED]


def test_a_citation_holds_only_when_the_cited_passage_supports_the_claim(model_dir: Path) -> None:
    answer = "Tickets cost ten euros for adults [1]. The garden closes at dusk [2]."
    judged = NLIJudge(model_dir).evaluate_sync(record(answer, MUSEUM, PERMIT), (CITATION,))
    assert [c.citation_holds for c in judged.claims] == [True, False]
    assert judged.score(CITATION) == 0.5


def test_the_judge_runs_in_a_judge_process_that_makes_its_own_session(model_dir: Path) -> None:
    import asyncio

    judge = NLIJudge(model_dir)
    restored = pickle.loads(pickle.dumps(judge))
    assert restored.evaluate_sync(record(ANSWER, MUSEUM)).score(FAITHFULNESS) == 1.0
    isolated = ProcessJudge(judge, timeout=60.0)
    try:
        judged = asyncio.run(isolated.evaluate(record(ANSWER, MUSEUM), (FAITHFULNESS,)))
    finally:
        isolated.close()
    assert judged.status is EvalStatus.OK and judged.judge == "nli"
    assert judged.score(FAITHFULNESS) == 1.0


def test_an_unusable_model_lets_the_fallback_judge_answer(tmp_path: Path) -> None:
    import asyncio

    from ragpulse.judges import LexicalJudge
    from ragpulse.judging import ResilientJudge

    judge = ResilientJudge(
        NLIJudge(tmp_path / "gone"), fallback=LexicalJudge(), isolate_cpu_bound=False
    )
    judged = asyncio.run(judge.evaluate(record(ANSWER, MUSEUM), (FAITHFULNESS,)))
    assert judged.status is EvalStatus.OK and judged.judge == "lexical"
    assert judged.explanation is not None and errors.JUDGE_UNAVAILABLE in judged.explanation


def test_context_recall_is_the_models_entailment_of_the_reference_claims(model_dir: Path) -> None:
    judged = NLIJudge(model_dir).evaluate_sync(
        record(ANSWER, PERMIT, MUSEUM, reference="Tickets cost ten euros for adults."),
        ("context_recall", "context_precision"),
    )
    assert judged.score("context_recall") == 1.0
    # The museum leaflet holds the reference claim; it is ranked second.
    assert [c.relevant for c in judged.contexts] == [False, True]
    assert judged.score("context_precision") == 0.5


def test_a_reference_claim_no_passage_entails_is_not_recalled(model_dir: Path) -> None:
    judged = NLIJudge(model_dir).evaluate_sync(
        record(ANSWER, MUSEUM, reference="The cafe has a permit."), ("context_recall",)
    )
    assert judged.score("context_recall") == 0.0
