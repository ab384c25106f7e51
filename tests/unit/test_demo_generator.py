"""The demo's retriever, extractive generator and fault injection, with the real lexical judge."""

from __future__ import annotations

import asyncio
import random
import re
from dataclasses import replace
from typing import Any

import pytest

from ragpulse.demo.corpus import DOCUMENTS, DOCUMENTS_BY_ID, UNSUPPORTED
from ragpulse.demo.generator import (
    AGENT_FAULTS,
    RETRIEVAL_FAULTS,
    ExtractiveGenerator,
    FaultKind,
    InjectedFault,
    Source,
    Style,
    cite,
    inject_fault,
    plan_faults,
    restate,
    split_sentences,
)
from ragpulse.demo.questions import QUESTIONS, Question
from ragpulse.demo.retriever import Bm25Retriever, tokenize
from ragpulse.evaluation.types import (
    CITATION,
    COMPLETENESS,
    GROUNDEDNESS,
    RELEVANCY,
    Context,
    RagRecord,
    Verdict,
)
from ragpulse.judges import LexicalJudge
from ragpulse.metrics import METRICS

SEEDS = range(12)


@pytest.fixture(scope="module")
def retriever() -> Bm25Retriever:
    return Bm25Retriever()


def _sources(retriever: Bm25Retriever, question: Question) -> list[Source]:
    return [Source(p.text, p.document.id) for p in retriever.search(question.text)]


def _clean_answers(retriever: Bm25Retriever) -> list[tuple[Question, list[Source], str]]:
    generator = ExtractiveGenerator()
    answers = []
    for question in QUESTIONS:
        sources = _sources(retriever, question)
        answers.append(
            (question, sources, cite(generator.generate(question.text, sources), sources))
        )
    return answers


def _faults(
    retriever: Bm25Retriever, kind: FaultKind | None = None
) -> list[tuple[list[Source], str, str, InjectedFault]]:
    """Faults injected into every question's answer, for several seeds."""
    cases = []
    for question, sources, answer in _clean_answers(retriever):
        for seed in SEEDS:
            new, fault = inject_fault(
                answer,
                sources,
                random.Random(seed),
                kind,
                question=question.text,
                required=question.fact,
            )
            cases.append((sources, answer, new, fault))
    return cases


def _judge(question: str, sources: list[Source], answer: str) -> list[Verdict]:
    record = RagRecord(question, tuple(Context(s.text, s.id) for s in sources), answer)
    evaluation = asyncio.run(LexicalJudge().evaluate(record, (GROUNDEDNESS,)))
    return [c.verdict for c in evaluation.claims]


# --- retrieval -----------------------------------------------------------------------


@pytest.mark.parametrize("question", QUESTIONS, ids=lambda q: q.doc_id)
def test_retriever_ranks_the_answering_document_first(
    retriever: Bm25Retriever, question: Question
) -> None:
    passages = retriever.search(question.text)
    assert passages[0].document.id == question.doc_id


def test_retriever_returns_at_most_k_passages_best_first(retriever: Bm25Retriever) -> None:
    passages = retriever.search("sharing link password expiry", k=5)
    assert 0 < len(passages) <= 5
    assert [p.score for p in passages] == sorted((p.score for p in passages), reverse=True)


def test_retriever_returns_nothing_for_a_query_with_no_known_term(
    retriever: Bm25Retriever,
) -> None:
    assert retriever.search("zebra quokka") == []


def test_tokenize_keeps_versions_and_thousands_whole_and_folds_plurals() -> None:
    assert tokenize("Larkspur 5.1.2 queues 50,000 changes") == [
        "larkspur",
        "5.1.2",
        "queue",
        "50,000",
        "change",
    ]


# --- clean answers --------------------------------------------------------------------


@pytest.mark.parametrize("question", QUESTIONS, ids=lambda q: q.doc_id)
def test_every_question_fact_is_stated_in_its_document(question: Question) -> None:
    assert question.fact in DOCUMENTS_BY_ID[question.doc_id].text


def test_extractive_answer_has_one_to_three_sentences_copied_from_the_passages(
    retriever: Bm25Retriever,
) -> None:
    for _, sources, answer in _clean_answers(retriever):
        sentences = split_sentences(answer)
        assert 1 <= len(sentences) <= 3
        for cited in sentences:
            sentence = re.sub(r" \[\d+\]", "", cited)  # the marker the app adds
            assert any(sentence in s.text for s in sources), sentence


def test_extractive_answer_states_the_question_fact(retriever: Bm25Retriever) -> None:
    missing = [q.text for q, _, answer in _clean_answers(retriever) if q.fact not in answer]
    assert missing == []


def test_clean_answers_are_fully_supported_by_the_lexical_judge(
    retriever: Bm25Retriever,
) -> None:
    unsupported = {
        question.text: verdicts
        for question, sources, answer in _clean_answers(retriever)
        if (verdicts := _judge(question.text, sources, answer))
        and any(v is not Verdict.SUPPORTED for v in verdicts)
    }
    assert unsupported == {}


# --- clean answers worded as a chat model words them -------------------------------------


def test_a_verbatim_style_leaves_the_answer_as_it_is(retriever: Bm25Retriever) -> None:
    for _, _, answer in _clean_answers(retriever):
        assert restate(answer, Style.VERBATIM) == answer


def test_restating_keeps_every_citation_marker(retriever: Bm25Retriever) -> None:
    for _, _, answer in _clean_answers(retriever):
        for style in (Style.REWORDED, Style.SUMMARY):
            assert re.findall(r"\[\d+\]", restate(answer, style)) == re.findall(r"\[\d+\]", answer)


def test_restating_rewords_and_restates_numbers() -> None:
    answer = "The Team plan costs $11 per user per month. Each account receives 10 codes."
    reworded = restate(answer, Style.REWORDED)
    assert "is priced at $11" in reworded
    assert "gets ten codes" in reworded
    summary = restate(answer, Style.SUMMARY)
    assert len(split_sentences(summary)) == 1
    assert summary.endswith("gets ten codes.")


def test_a_figure_of_a_name_is_not_spelt_out() -> None:
    assert "Windows 10 or later" in restate("It runs on Windows 10 or later.", Style.REWORDED)


def test_restated_clean_answers_are_faithful_to_the_lexical_judge(
    retriever: Bm25Retriever,
) -> None:
    # Reworded and summed-up answers state the same facts: the offline judge may call a
    # claim INFERRED rather than SUPPORTED, never unsupported or contradicted.
    flagged = {}
    for question, sources, answer in _clean_answers(retriever):
        for style in (Style.REWORDED, Style.SUMMARY):
            text = restate(answer, style)
            verdicts = _judge(question.text, sources, text)
            if any(v in (Verdict.NOT_FOUND, Verdict.CONTRADICTED) for v in verdicts):
                flagged[text] = verdicts
    assert flagged == {}


# --- fault planning --------------------------------------------------------------------


def test_fault_plan_is_the_requested_share_of_requests() -> None:
    plan = plan_faults(60, 0.3, seed=7)
    assert len(plan) == round(0.3 * 60)
    assert plan <= set(range(60))


def test_fault_plan_is_reproducible_from_its_seed() -> None:
    assert plan_faults(60, 0.3, seed=7) == plan_faults(60, 0.3, seed=7)
    assert plan_faults(60, 0.3, seed=7) != plan_faults(60, 0.3, seed=8)


def test_fault_plan_is_empty_without_drift() -> None:
    assert plan_faults(60, 0.0, seed=7) == frozenset()


def test_injected_fault_is_reproducible_from_its_seed(retriever: Bm25Retriever) -> None:
    for _, sources, answer in _clean_answers(retriever):
        first = inject_fault(answer, sources, random.Random("7:3"))
        again = inject_fault(answer, sources, random.Random("7:3"))
        assert first == again


# --- ground truth ----------------------------------------------------------------------


def test_ground_truth_range_holds_the_injected_text(retriever: Bm25Retriever) -> None:
    for _, _, new, fault in _faults(retriever):
        assert new[fault.start : fault.end] == fault.injected


def test_undoing_a_replacement_restores_the_clean_answer(retriever: Bm25Retriever) -> None:
    for _, answer, new, fault in _faults(retriever):
        if fault.kind is FaultKind.UNSUPPORTED_SENTENCE:
            continue
        assert fault.original != fault.injected
        assert new[: fault.start] + fault.original + new[fault.end :] == answer


def test_removing_an_added_sentence_restores_the_clean_answer(retriever: Bm25Retriever) -> None:
    added = [c for c in _faults(retriever) if c[3].kind is FaultKind.UNSUPPORTED_SENTENCE]
    assert added
    for _, answer, new, fault in added:
        remaining = [s for s in split_sentences(new) if s != fault.injected]
        assert " ".join(remaining) == answer


def test_every_kind_of_answer_fault_occurs(retriever: Bm25Retriever) -> None:
    # The retrieval faults are injected into the search results (SupportBot), and the agent's
    # into its tool call, not into answers.
    expected = set(FaultKind) - RETRIEVAL_FAULTS - AGENT_FAULTS
    assert {case[3].kind for case in _faults(retriever)} == expected


def test_changed_number_occurs_in_none_of_the_passages(retriever: Bm25Retriever) -> None:
    cases = _faults(retriever, FaultKind.CHANGED_NUMBER)
    changed = [c for c in cases if c[3].kind is FaultKind.CHANGED_NUMBER]
    assert changed
    for sources, _, _, fault in changed:
        figure = fault.injected.strip("$%")
        for source in sources:
            assert not re.search(rf"(?<![\d.,]){re.escape(figure)}(?![\d]|[.,]\d)", source.text)


def test_foreign_date_is_taken_from_a_document_that_was_not_retrieved(
    retriever: Bm25Retriever,
) -> None:
    cases = _faults(retriever, FaultKind.FOREIGN_DATE)
    swapped = [c for c in cases if c[3].kind is FaultKind.FOREIGN_DATE]
    assert swapped
    for sources, _, _, fault in swapped:
        assert fault.source_id not in {s.id for s in sources}
        assert fault.source_id is not None
        assert fault.injected in DOCUMENTS_BY_ID[fault.source_id].text
        assert all(fault.injected not in s.text for s in sources)


def test_a_date_fault_falls_back_to_another_kind_when_the_answer_has_no_date() -> None:
    sources = [Source(DOCUMENTS_BY_ID["pricing-billing"].text, "pricing-billing")]
    answer = "Paying annually saves 15% compared with monthly billing."
    _, fault = inject_fault(answer, sources, random.Random(1), FaultKind.FOREIGN_DATE)
    assert fault.kind is not FaultKind.FOREIGN_DATE


def test_unsupported_statements_occur_in_no_document() -> None:
    corpus = " ".join(doc.text for doc in DOCUMENTS)
    for statements in UNSUPPORTED.values():
        for statement in statements:
            assert statement not in corpus


def test_changed_numbers_and_foreign_dates_are_not_supported_by_the_lexical_judge(
    retriever: Bm25Retriever,
) -> None:
    for kind in (FaultKind.CHANGED_NUMBER, FaultKind.FOREIGN_DATE):
        for sources, _, new, fault in _faults(retriever, kind):
            if fault.kind is not kind:
                continue
            record = RagRecord("q", tuple(Context(s.text, s.id) for s in sources), new)
            evaluation = asyncio.run(LexicalJudge().evaluate(record, (GROUNDEDNESS,)))
            faulty = [
                c
                for c in evaluation.claims
                if c.claim.answer_start is not None
                and c.claim.answer_end is not None
                and c.claim.answer_start <= fault.start < c.claim.answer_end
            ]
            assert faulty, (new, fault)
            assert all(c.verdict is not Verdict.SUPPORTED for c in faulty), (new, fault)


# --- the vector's faults -----------------------------------------------------------------


def _judged(sources: list[Source], new: str, question: str | None = None) -> Any:
    record = RagRecord(
        question,
        tuple(Context(s.text, s.id) for s in sources),
        new,
    )
    return LexicalJudge().evaluate_sync(record, METRICS)


def test_clean_answers_cite_the_passage_of_each_sentence(retriever: Bm25Retriever) -> None:
    for _, sources, answer in _clean_answers(retriever):
        for sentence in split_sentences(answer):
            marker = re.search(r" \[(\d+)\]", sentence)
            assert marker is not None, sentence
            text = sentence.replace(marker.group(0), "")
            assert text in sources[int(marker.group(1)) - 1].text


def test_an_off_question_answer_is_a_true_sentence_sharing_no_word_with_the_question(
    retriever: Bm25Retriever,
) -> None:
    for question, sources, answer in _clean_answers(retriever):
        new, fault = inject_fault(
            answer, sources, random.Random(0), FaultKind.OFF_QUESTION, question=question.text
        )
        if fault.kind is not FaultKind.OFF_QUESTION:
            continue
        sentence = re.sub(r" \[\d+\]", "", new)
        assert any(sentence in s.text for s in sources)
        assert not set(tokenize(sentence)) & set(tokenize(question.text))


def test_an_omitted_part_drops_the_sentence_with_the_required_fact(
    retriever: Bm25Retriever,
) -> None:
    omitted = 0
    for question, sources, answer in _clean_answers(retriever):
        new, fault = inject_fault(
            answer, sources, random.Random(0), FaultKind.OMITTED_PART, required=question.fact
        )
        if fault.kind is not FaultKind.OMITTED_PART:
            continue
        omitted += 1
        assert question.fact in answer and question.fact not in new
        assert new.strip()
    assert omitted


def test_a_wrong_citation_points_at_a_passage_without_the_sentence(
    retriever: Bm25Retriever,
) -> None:
    for _, sources, answer in _clean_answers(retriever):
        new, fault = inject_fault(answer, sources, random.Random(0), FaultKind.WRONG_CITATION)
        if fault.kind is not FaultKind.WRONG_CITATION:
            continue
        cited = int(fault.injected.strip("[]"))
        sentence = next(s for s in split_sentences(new) if fault.injected in s)
        assert sentence.replace(" " + fault.injected, "") not in sources[cited - 1].text


def test_the_lexical_judge_catches_each_kind_of_the_vector_by_its_own_signal(
    retriever: Bm25Retriever,
) -> None:
    caught: dict[FaultKind, list[bool]] = {}
    for question, sources, answer in _clean_answers(retriever):
        record = RagRecord(
            question.text,
            tuple(Context(s.text, s.id) for s in sources),
            answer,
            rubric=(question.fact,),
        )
        for kind in (
            FaultKind.OFF_QUESTION,
            FaultKind.OMITTED_PART,
            FaultKind.WRONG_CITATION,
            FaultKind.UNWARRANTED_ABSTENTION,
        ):
            new, fault = inject_fault(
                answer,
                sources,
                random.Random(0),
                kind,
                question=question.text,
                required=question.fact,
            )
            if fault.kind is not kind:
                continue
            evaluation = LexicalJudge().evaluate_sync(replace(record, answer=new), METRICS)
            signal = {
                FaultKind.OFF_QUESTION: (evaluation.score(RELEVANCY) or 0.0) < 0.7,
                FaultKind.OMITTED_PART: (evaluation.score(COMPLETENESS) or 0.0) < 0.7,
                FaultKind.WRONG_CITATION: (evaluation.score(CITATION) or 0.0) < 0.7,
                FaultKind.UNWARRANTED_ABSTENTION: evaluation.score(GROUNDEDNESS) == 0.0
                and evaluation.abstained is True,
            }[kind]
            caught.setdefault(kind, []).append(signal)
    assert set(caught) == {
        FaultKind.OFF_QUESTION,
        FaultKind.OMITTED_PART,
        FaultKind.WRONG_CITATION,
        FaultKind.UNWARRANTED_ABSTENTION,
    }
    rates = {kind: sum(hits) / len(hits) for kind, hits in caught.items()}
    assert rates[FaultKind.OFF_QUESTION] >= 0.9
    assert rates[FaultKind.WRONG_CITATION] >= 0.9
    assert rates[FaultKind.UNWARRANTED_ABSTENTION] == 1.0
    # Word overlap misses an omission when the remaining sentences repeat the fact's words.
    assert rates[FaultKind.OMITTED_PART] >= 0.75


def test_clean_cited_answers_rarely_fire_the_vector_signals(retriever: Bm25Retriever) -> None:
    fired = 0
    answers = _clean_answers(retriever)
    for question, sources, answer in answers:
        record = RagRecord(
            question.text,
            tuple(Context(s.text, s.id) for s in sources),
            answer,
            rubric=(question.fact,),
        )
        evaluation = LexicalJudge().evaluate_sync(record, METRICS)
        scores = [evaluation.score(m) for m in (RELEVANCY, CITATION)]
        fired += any(s is not None and s < 0.7 for s in scores) or bool(evaluation.abstained)
    assert fired / len(answers) <= 0.1
