"""The probe's prompts: reading MATH8K-style files, and dropping those that are eval problems (13-gram overlap)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from evals.benchmarks import BENCHMARKS, SUITES, gold_text, question_text
from mathmix.records import read_records


def load_prompts(path: Path, dropped: Counter | None = None) -> list[dict[str, str]]:
    """MATH8K-style prompts: JSONL (or a JSON array) of records with `prompt` (or problem/question) and `answer`.

    `dropped` counts the records left out, by reason: "not_an_object", "no_prompt", "no_answer" (they used to
    be left out silently); a prompt or answer that is blank or not text (an answer may be a number) is none.

    Raises:
        ValueError: naming PATH when it holds no records, or none with a prompt and an answer.
    """
    records = [record for _, record in read_records(path)]
    if not records:
        raise ValueError(f"no prompts in {path}")
    out = []
    dropped = Counter() if dropped is None else dropped
    for r in records:
        if not isinstance(r, dict):
            dropped["not_an_object"] += 1
            continue
        # text not blank, as eval bench takes it: a blank or non-text prompt (a list, a mapping) or answer was
        # trained on as its `str` ("['a']")
        question = question_text(r, ("prompt", "problem", "question"))
        # a list of final answers (OlympiadBench's) joined as eval bench joins it: it was refused since d1c71c2
        answer = gold_text(r.get("answer", r.get("gt_answer", r.get("final_answer"))))
        if question is not None and answer:
            out.append({"question": question, "answer": answer})
        else:
            dropped["no_prompt" if question is None else "no_answer"] += 1
    if not out:
        fields = sorted({k for r in records if isinstance(r, dict) for k in r})
        raise ValueError(
            f"no prompt/answer fields in {path} (fields found: {', '.join(fields) or 'none'}; "
            "need prompt, problem or question, and answer)"
        )
    return out


def check_overlap(
    prompts: list[dict[str, str]],
    eval_files: list[Path],
    policy: str,
    ngram: int = 13,
    min_fraction: float = 0.5,
) -> tuple[list[dict[str, str]], dict[str, Any]]:
    """Drop (or refuse, or only report) prompts that are eval problems: 13-gram hits over >= min_fraction of them,
    or an eval problem too short for a 13-gram found whole in them.

    A bare 13-gram hit is not enough: competition boilerplate ("where m and n are relatively prime positive
    integers. Find m+n") is shared by unrelated problems (187 of MATH8K's 8,521 prompts hit AIME24 that way).
    """
    try:
        from curate.decont import decont_tokens, find_overlaps
    except ImportError:  # the decontamination package is optional for a probe run elsewhere
        return prompts, {"checked": False, "reason": "curate.decont not importable"}
    if not eval_files:
        return prompts, {"checked": False, "reason": "no benchmark folder (--no-eval-sets)"}
    texts = [p["question"] for p in prompts]
    hits = find_overlaps(texts, [str(f) for f in eval_files], ngram=ngram)
    any_hit = [i for i, h in enumerate(hits) if h]
    bad = []
    for i in any_hit:
        positions = max(1, len(decont_tokens(texts[i])) - ngram + 1)
        # a short eval problem found whole in the prompt is that problem, whatever else the prompt says
        if any(o.whole for o in hits[i]) or max(o.n_matched for o in hits[i]) / positions >= min_fraction:
            bad.append(i)
    # An eval problem given as the prompt itself: problems too short for the n-gram and whole-match rules
    # ("Simplify $\sqrt{242}$."; MATH500 read as prompts: 62 of its 500) went through unchecked.
    problems = _eval_problems(eval_files)
    flagged = set(bad)
    identical = {i: problems[plain] for i, text in enumerate(texts) if (plain := _plain(text)) in problems}
    exact = [i for i in identical if i not in flagged]
    bad = sorted(bad + exact)

    def shown(i: int) -> list[dict[str, Any]]:
        """Two of prompt I's overlaps, an identical eval problem first (caught as one alone, a prompt has no
        n-gram overlap to show)."""
        first = [identical[i]] if i in identical else []
        return (first + [o.to_dict() for o in hits[i][:2]])[:2]

    report = {
        "checked": True,
        "eval_sets": [str(f) for f in eval_files],
        "ngram": ngram,
        "min_fraction": min_fraction,
        "prompts_with_any_hit": len(any_hit),
        "overlapping_prompts": len(bad),
        "identical_to_an_eval_problem": len(exact),
        "examples": [{"prompt": i, "overlaps": shown(i)} for i in bad[:5]],
    }
    if bad and policy == "fail":
        raise ValueError(
            f"{len(bad)} RL prompts overlap eval sets (first: prompt {bad[0]}); see --on-overlap"
        )
    if policy == "drop":
        drop = set(bad)
        prompts = [p for i, p in enumerate(prompts) if i not in drop]
        report["dropped"] = len(bad)
    return prompts, report


def _plain(text: str) -> str:
    """A problem statement compared as text: lower case, whitespace runs as one space."""
    return " ".join(text.lower().split())


def _eval_problems(eval_files: list[Path]) -> dict[str, dict[str, Any]]:
    """The problem statements of the eval sets (`_plain`), whatever their field names, each with the first record
    that states it: {"benchmark" (named as `curate.decont` names it), "problem", "identical": True}."""
    from curate.decont_sources import benchmark_files
    from mathmix.records import read_objects

    fields = ("problem", "question", "prompt")
    problems: dict[str, dict[str, Any]] = {}
    for name, path in benchmark_files(eval_files):
        for record in read_objects(path):
            text = next((record[f] for f in fields if record.get(f)), None)
            if isinstance(text, str):
                problems.setdefault(_plain(text), {"benchmark": name, "problem": text, "identical": True})
    return problems


def eval_set_files(data_dir: Path | None) -> list[Path]:
    """Test files of the OctoThinker suite's benchmarks (MATH500 included) present under the bench data folder.

    The full MATH test set is not one of them: MATH8K is drawn from MATH train + test by design.

    Raises:
        ValueError: DATA_DIR holds none of them (the check would silently check nothing).
    """
    if data_dir is None:
        return []
    files = []
    for name, _ in SUITES["octothinker"]:
        spec = BENCHMARKS[name]
        found = next((data_dir / c for c in spec.test if (data_dir / c).exists()), None)
        if found is not None and found not in files:
            files.append(found)
    if not files:
        looked = ", ".join(BENCHMARKS[name].test[0] for name, _ in SUITES["octothinker"])
        raise ValueError(f"no eval test set under {data_dir} (looked for {looked}, ...); see --data-dir")
    return files
