"""Scores for one question: retrieval against gold sources (ranx), answers against references.

Retrieval (k = 1..10 over the ranked passages the pipeline retrieves, i.e. k is what
`-k K` puts in the prompt). A passage is relevant when its source matches a gold source:
same basename, or the source path ends with the gold path ("html/sbatch.html"). Each gold
source counts once, at the rank of its first passage; later passages of the same source are
non-relevant duplicates. So hit@k = some gold source among the top k passages, recall@k =
share of gold sources among them, MRR = 1 / rank of the first gold passage (0 if none in
the list), nDCG@k with binary gains. The measures are computed by ranx (not hand-rolled).
A question without gold sources (unknown, or unanswerable) has no retrieval metrics.

Answers, SQuAD-style: `normalize_answer` lowercases, drops punctuation, the articles a/an/the
and extra whitespace; exact match and token F1 take the best over the references.
`reference_contained`: some normalised reference is a substring of the normalised answer
(fits long answers to short-answer references such as Spec-Bench's). Keyword recall is
the share of answer keywords found whole in the answer, with whitespace collapsed but punctuation
kept (keywords are often options like `--array=0-9%2`), case ignored but in options.
"""

from __future__ import annotations

import re
import string
import warnings
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import PurePosixPath
from typing import Any

KS = tuple(range(1, 11))
CANDIDATES = max(KS)


def source_matches(source: str, gold: str) -> bool:
    """Does a retrieved source path name the gold file (same basename, or a path suffix)?"""
    source, gold = source.replace("\\", "/").rstrip("/"), gold.replace("\\", "/").strip().rstrip("/")
    if not source or not gold:
        return False
    if "/" not in gold:
        return PurePosixPath(source).name == gold
    return source == gold or source.endswith("/" + gold.lstrip("/"))


def ranked_ids(sources: Sequence[str], gold: Sequence[str]) -> list[str]:
    """One id per retrieved passage, in rank order: the gold source it first matches, else a unique miss id."""
    ids, found = [], set()
    for rank, source in enumerate(sources, 1):
        match = next((g for g in gold if g not in found and source_matches(source, g)), None)
        if match is None:
            ids.append(f"miss:{rank}:{source}")
        else:
            found.add(match)
            ids.append(f"gold:{match}")
    return ids


def retrieval_metrics(sources: Sequence[str], gold: Sequence[str], ks: Sequence[int] = KS) -> dict[str, float] | None:
    """hit@k, recall@k, ndcg@k for each k, and mrr, of ranked `sources` against `gold`; None without gold."""
    gold = list(dict.fromkeys(g for g in gold if g.strip()))
    if not gold:
        return None
    ids = ranked_ids(sources, gold)
    names = [f"{m}@{k}" for k in ks for m in ("hit_rate", "recall", "ndcg")] + ["mrr"]
    if not ids:
        return {_public(n): 0.0 for n in names}
    from ranx import Qrels, Run, evaluate

    qrels = Qrels({"q": {f"gold:{g}": 1 for g in gold}})
    run = Run({"q": {doc: float(len(ids) - i) for i, doc in enumerate(ids)}})  # scores keep the rank order
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # numba type-safety chatter
        scores = evaluate(qrels, run, names, make_comparable=True)
    return {_public(n): round(float(v), 6) for n, v in scores.items()}


def _public(name: str) -> str:
    return name.replace("hit_rate", "hit")


# --- answers ---------------------------------------------------------------------------------------

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCT = str.maketrans("", "", string.punctuation)
_SPACE = re.compile(r"\s+")


def normalize_answer(text: str) -> str:
    """SQuAD normalisation: lowercase, no punctuation, no articles, single spaces."""
    text = _ARTICLES.sub(" ", text.lower().translate(_PUNCT))
    return " ".join(text.split())


def exact_match(answer: str, references: Sequence[str]) -> float | None:
    if not references:
        return None
    return float(any(normalize_answer(answer) == normalize_answer(r) for r in references))


def token_f1(answer: str, references: Sequence[str]) -> float | None:
    if not references:
        return None
    return max(_f1(normalize_answer(answer).split(), normalize_answer(r).split()) for r in references)


def _f1(predicted: list[str], truth: list[str]) -> float:
    if not predicted or not truth:
        return float(predicted == truth)
    common = sum((Counter(predicted) & Counter(truth)).values())
    if common == 0:
        return 0.0
    precision, recall = common / len(predicted), common / len(truth)
    return round(2 * precision * recall / (precision + recall), 6)


def reference_contained(answer: str, references: Sequence[str]) -> float | None:
    if not references:
        return None
    padded = f" {normalize_answer(answer)} "
    return float(any(normalize_answer(r) and f" {normalize_answer(r)} " in padded for r in references))


# {option: {tool: the option's other forms}}: srun's `--unbuffered` is also its `-u` (option_forms)
OptionForms = Mapping[str, Mapping[str, frozenset[str]]]
_OPTION = re.compile(r"--?[A-Za-z][\w-]*")


def keyword_recall(answer: str, keywords: Sequence[str], forms: OptionForms | None = None) -> float | None:
    """Share of `keywords` in `answer` (whitespace collapsed, punctuation kept); None without any.

    A keyword counts only as a whole: where it begins or ends with a word character, the answer must not
    go on with one there (`Name=` is not in `--job-name=`, `cpu` is not in `cpus`). Case is ignored except
    in an option (`-N` and `-n` are two options). An option keyword also counts in another form its tool's page
    gives it (`forms`), on a line that runs that tool: `srun -u prog` holds `--unbuffered`, `squeue -u` does not
    (fresh15, session 60: `srun -u` and `sbatch -e`, each right, had scored nothing)."""
    if not keywords:
        return None
    text = _SPACE.sub(" ", answer)
    found = (
        _keyword_in(_SPACE.sub(" ", k.strip()), text) or _other_form_in(k.strip(), answer, forms or {})
        for k in keywords
    )
    return round(sum(found) / len(keywords), 6)


def _other_form_in(keyword: str, answer: str, forms: OptionForms) -> bool:
    for tool, others in forms.get(keyword, {}).items():
        for line in answer.splitlines():
            ran = re.search(rf"(?<![\w./-]){re.escape(tool)}(?![\w.-])", line)
            if ran and any(_keyword_in(other, line[ran.end() :]) for other in others):
                return True
    return False


def option_forms(options: Mapping[str, Mapping[str, Any]]) -> dict[str, dict[str, frozenset[str]]]:
    """The forms of each option, from each tool's option entries ({tool: {name: entry}}, tool_pages.ToolPages'
    `options`), whose terms name them all (`-u, --unbuffered`)."""
    forms: dict[str, dict[str, frozenset[str]]] = {}
    for tool, entries in options.items():
        for entry in entries.values():
            names = {match.group() for form in entry.term.split(",") if (match := _OPTION.match(form.strip()))}
            for name in names:
                if others := frozenset(names - {name}):
                    forms.setdefault(name, {})[tool] = others
    return forms


def _keyword_in(keyword: str, text: str) -> bool:
    pattern = re.escape(keyword)
    if re.match(r"\w", keyword):
        pattern = r"(?<![\w-])" + pattern
    if re.search(r"\w$", keyword):
        pattern += r"(?!\w)"
    return re.search(pattern, text, 0 if keyword.startswith("-") else re.IGNORECASE) is not None
