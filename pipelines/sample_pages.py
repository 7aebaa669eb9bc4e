"""Templates for the quickstart's sample pages: short math articles in six markup styles and plain pages."""

from __future__ import annotations

import html as html_lib
import random
from typing import Any
from urllib.parse import quote

MATH_TOPICS: list[dict[str, Any]] = [
    {
        "slug": "quadratic-formula",
        "title": "The quadratic formula",
        "prose": [
            "Every quadratic equation can be solved by completing the square.",
            "The discriminant tells us how many real roots the equation has.",
            "When the discriminant is negative, the roots are complex conjugates.",
        ],
        "tex": [r"ax^2 + bx + c = 0", r"x = \frac{-b \pm \sqrt{b^2 - 4ac}}{2a}", r"\Delta = b^2 - 4ac"],
    },
    {
        "slug": "geometric-series",
        "title": "Summing a geometric series",
        "prose": [
            "A geometric series multiplies each term by the same ratio.",
            "If the ratio is smaller than one in absolute value, the series converges.",
            "Multiplying the partial sum by the ratio and subtracting gives a closed form.",
        ],
        "tex": [
            r"S_n = \sum_{k=0}^{n-1} r^k",
            r"S_n = \frac{1 - r^n}{1 - r}",
            r"\sum_{k=0}^{\infty} r^k = \frac{1}{1-r}",
        ],
    },
    {
        "slug": "derivative-product-rule",
        "title": "The product rule for derivatives",
        "prose": [
            "The derivative of a product is not the product of the derivatives.",
            "We prove the rule from the limit definition of the derivative.",
            "Adding and subtracting the same term splits the limit into two familiar pieces.",
        ],
        "tex": [
            r"(fg)' = f'g + fg'",
            r"\lim_{h \to 0} \frac{f(x+h)g(x+h) - f(x)g(x)}{h}",
            r"\frac{d}{dx} x^2 \sin x = 2x \sin x + x^2 \cos x",
        ],
    },
    {
        "slug": "pythagorean-theorem",
        "title": "A proof of the Pythagorean theorem",
        "prose": [
            "Place four copies of a right triangle inside a square of side a plus b.",
            "The area of the large square can be computed in two different ways.",
            "Comparing the two expressions for the area proves the theorem.",
        ],
        "tex": [
            r"a^2 + b^2 = c^2",
            r"(a+b)^2 = c^2 + 4 \cdot \frac{ab}{2}",
            r"\sin^2 \theta + \cos^2 \theta = 1",
        ],
    },
    {
        "slug": "binomial-theorem",
        "title": "The binomial theorem",
        "prose": [
            "The binomial coefficients count the ways to choose k objects from n.",
            "Expanding a power of a sum collects the terms with the same exponents.",
            "Pascal's triangle lists the coefficients row by row.",
        ],
        "tex": [
            r"(x+y)^n = \sum_{k=0}^{n} \binom{n}{k} x^k y^{n-k}",
            r"\binom{n}{k} = \frac{n!}{k!(n-k)!}",
            r"\binom{n}{k} = \binom{n-1}{k-1} + \binom{n-1}{k}",
        ],
    },
    {
        "slug": "eigenvalues",
        "title": "Eigenvalues of a two by two matrix",
        "prose": [
            "An eigenvector keeps its direction when the matrix acts on it.",
            "The eigenvalues are the roots of the characteristic polynomial.",
            "For a two by two matrix the polynomial depends only on the trace and the determinant.",
        ],
        "tex": [
            r"A v = \lambda v",
            r"\det(A - \lambda I) = 0",
            r"\lambda^2 - \operatorname{tr}(A)\lambda + \det A = 0",
        ],
    },
    {
        "slug": "integration-by-parts",
        "title": "Integration by parts",
        "prose": [
            "Integration by parts reverses the product rule.",
            "Choosing which factor to differentiate is the whole art of the method.",
            "Repeating the method twice solves integrals of exponentials times sines.",
        ],
        "tex": [
            r"\int u \, dv = uv - \int v \, du",
            r"\int x e^x \, dx = x e^x - e^x + C",
            r"\int_0^1 x^2 \, dx = \frac{1}{3}",
        ],
    },
    {
        "slug": "modular-arithmetic",
        "title": "Modular arithmetic and Fermat's little theorem",
        "prose": [
            "Two integers are congruent when their difference is divisible by the modulus.",
            "Fermat's little theorem gives a fast test for many composite numbers.",
            "Euler generalised the theorem to any modulus coprime to the base.",
        ],
        "tex": [r"a \equiv b \pmod{n}", r"a^{p-1} \equiv 1 \pmod{p}", r"a^{\varphi(n)} \equiv 1 \pmod{n}"],
    },
    {
        "slug": "normal-distribution",
        "title": "The normal distribution",
        "prose": [
            "The normal distribution is described by its mean and its variance.",
            "About ninety five percent of the probability lies within two standard deviations.",
            "The central limit theorem explains why it appears so often in practice.",
        ],
        "tex": [
            r"f(x) = \frac{1}{\sigma\sqrt{2\pi}} e^{-\frac{(x-\mu)^2}{2\sigma^2}}",
            r"\mathbb{E}[X] = \mu",
            r"\operatorname{Var}(X) = \sigma^2",
        ],
    },
    {
        "slug": "limits-squeeze",
        "title": "The squeeze theorem",
        "prose": [
            "If a function is trapped between two functions with the same limit, it shares that limit.",
            "The classic application is the limit of sine x over x at zero.",
            "A geometric argument with areas of sectors gives the needed inequalities.",
        ],
        "tex": [
            r"\lim_{x \to 0} \frac{\sin x}{x} = 1",
            r"\cos x \le \frac{\sin x}{x} \le 1",
            r"g(x) \le f(x) \le h(x)",
        ],
    },
    {
        "slug": "complex-numbers",
        "title": "Euler's formula for complex numbers",
        "prose": [
            "Every complex number has a modulus and an argument.",
            "Euler's formula links the exponential function with trigonometry.",
            "Multiplying complex numbers multiplies their moduli and adds their arguments.",
        ],
        "tex": [r"e^{i\theta} = \cos\theta + i\sin\theta", r"e^{i\pi} + 1 = 0", r"|z_1 z_2| = |z_1| |z_2|"],
    },
    {
        "slug": "induction",
        "title": "Proof by induction: the sum of the first n integers",
        "prose": [
            "Induction proves a statement for every natural number in two steps.",
            "The base case checks the first value and the inductive step carries the truth forward.",
            "Gauss is said to have found the formula by pairing terms from both ends.",
        ],
        "tex": [
            r"1 + 2 + \cdots + n = \frac{n(n+1)}{2}",
            r"\frac{n(n+1)}{2} + (n+1) = \frac{(n+1)(n+2)}{2}",
            r"\sum_{k=1}^{n} k^2 = \frac{n(n+1)(2n+1)}{6}",
        ],
    },
]

NONMATH_TOPICS: list[dict[str, Any]] = [
    {
        "slug": "city-council-budget",
        "title": "City council approves new library budget",
        "prose": [
            "The city council voted on Tuesday to approve a $60 million budget for the new central library.",
            "Residents praised the plan at a crowded public meeting that lasted late into the evening.",
            "Construction is expected to begin next spring and finish within two years.",
        ],
    },
    {
        "slug": "sourdough-recipe",
        "title": "A simple sourdough bread recipe",
        "prose": [
            "Feed your starter the night before so that it is bubbly and active in the morning.",
            "Mix the flour and water, rest the dough, then add the salt and the starter.",
            "Bake in a hot covered pot for twenty minutes, then uncover it to brown the crust.",
        ],
    },
    {
        "slug": "hiking-trail-guide",
        "title": "Hiking the coastal trail in autumn",
        "prose": [
            "The coastal trail winds along cliffs with views of the ocean and the lighthouse.",
            "Bring water, a warm jacket and sturdy boots, because the weather changes quickly.",
            "Parking at the trailhead costs $5 per day and fills up early on weekends.",
        ],
    },
    {
        "slug": "laptop-review",
        "title": "Review: a light laptop for students",
        "prose": [
            "The new laptop weighs just over a kilogram and lasts a full day on one charge.",
            "Its keyboard is comfortable, although the trackpad feels a little small.",
            "At $899 it costs less than most rivals with a similar screen.",
        ],
    },
    {
        "slug": "garden-tips",
        "title": "Ten tips for a healthier vegetable garden",
        "prose": [
            "Rotate your crops every year so that pests do not settle in the soil.",
            "Water deeply in the early morning rather than a little every evening.",
            "Compost kitchen scraps to return nutrients to the beds for free.",
        ],
    },
    {
        "slug": "football-match",
        "title": "Late goal seals the derby",
        "prose": [
            "A header in the final minute gave the home side a narrow win in the derby.",
            "The visitors had dominated possession but wasted several clear chances.",
            "Tickets for the return match go on sale on Friday morning.",
        ],
    },
    {
        "slug": "shell-tutorial",
        "title": "Getting started with the command line",
        "prose": [
            "Open a terminal and type the commands after the dollar sign prompt.",
            "The first command lists the files in the current folder, the second changes folder.",
            "Press the tab key to complete file names and save yourself some typing.",
        ],
        "code": "$ ls -la\n$ cd projects\n$ echo $HOME",
    },
    {
        "slug": "museum-opening",
        "title": "Museum reopens its modern art wing",
        "prose": [
            "After two years of renovation the modern art wing opened to visitors this weekend.",
            "The curators rearranged the collection around themes rather than dates.",
            "Entry is free for children and costs $12 for adults.",
        ],
    },
    {
        "slug": "coffee-shop",
        "title": "The best coffee shops downtown",
        "prose": [
            "We visited twelve cafes to find the best espresso in the city center.",
            "Our favourite roasts its own beans and serves pastries baked every morning.",
            "A flat white costs between $3.50 and $5 depending on the shop.",
        ],
    },
    {
        "slug": "travel-train",
        "title": "Crossing the mountains by train",
        "prose": [
            "The night train leaves the capital at nine and reaches the coast after breakfast.",
            "Sleeping cabins have two bunks, a small sink and a window onto the valleys.",
            "Book early, because the cheapest seats sell out weeks in advance.",
        ],
    },
    {
        "slug": "forum-mathjax-loaded",
        "title": "Forum: which camera should I buy?",
        "prose": [
            "I am choosing between two cameras for travel photography and cannot decide.",
            "The first one is lighter, but the second has a better lens and weather sealing.",
            "Thanks in advance for any advice from people who have used both.",
        ],
        "mathjax": True,
    },
    {
        "slug": "deutsche-nachrichten",
        "title": "Neue Radwege in der Innenstadt",
        "prose": [
            "Die Stadt baut in diesem Sommer neue Radwege entlang der Hauptstraße.",
            "Anwohner begrüßen die Pläne, Händler fürchten weniger Parkplätze.",
            "Die Arbeiten sollen im Herbst abgeschlossen sein.",
        ],
    },
]


def _katex(tex: str) -> str:
    return (
        '<span class="katex"><span class="katex-mathml"><math><semantics><mrow><mi>x</mi></mrow>'
        f'<annotation encoding="application/x-tex">{html_lib.escape(tex)}</annotation></semantics></math></span>'
        '<span class="katex-html" aria-hidden="true">rendered</span></span>'
    )


def _formula(tex: str, style: int, display: bool) -> str:
    esc = html_lib.escape(tex)
    if style == 0:
        mode = "; mode=display" if display else ""
        return f'<script type="math/tex{mode}">{esc}</script>'
    if style == 1:
        return f"\\[{esc}\\]" if display else f"\\({esc}\\)"
    if style == 2:
        return _katex(tex)
    if style == 3:
        block = ' display="block"' if display else ""
        return (
            f"<math{block}><semantics><mrow><mi>f</mi></mrow>"
            f'<annotation encoding="application/x-tex">{esc}</annotation></semantics></math>'
        )
    if style == 4:
        return (
            f'<span class="mwe-math-element"><span class="mwe-math-mathml-inline" style="display:none">'
            f'<math alttext="{esc}"><mi>f</mi></math></span>'
            f'<img class="mwe-math-fallback-image-inline" alt="{esc}" src="/media/math/render/svg/0"></span>'
        )
    return f'<img src="https://latex.codecogs.com/png.latex?{quote(tex)}" alt="{esc}">'


def math_page(topic: dict, index: int, rng: random.Random) -> bytes:
    """A short math article; the markup style rotates with `index` so every style appears."""
    style = index % 6
    head = ""
    if style in (0, 1):
        head = '<script src="https://cdn.example.org/mathjax/tex-chtml.js"></script>'
    elif style == 2:
        head = '<link rel="stylesheet" href="https://cdn.example.org/katex/katex.min.css">'
    paragraphs = []
    for i, sentence in enumerate(topic["prose"]):
        tex = topic["tex"][i % len(topic["tex"])]
        extra = rng.choice(["Note that", "Recall that", "In particular,", "It follows that"])
        paragraphs.append(
            f"<p>{sentence} {extra} we can write {_formula(tex, style, False)} in this setting.</p>"
            f"<p>{_formula(tex, style, True)}</p>"
        )
    nav = "<nav><a href='/'>Home</a> | <a href='/notes'>Notes</a> | <a href='/about'>About</a></nav>"
    body = (
        f"<html><head><meta charset='utf-8'><title>{topic['title']}</title>{head}</head><body>{nav}"
        f"<article><h1>{topic['title']}</h1>{''.join(paragraphs)}"
        f"<p>Exercise {index + 1}: try the result with a = {rng.randint(2, 9)} and b = {rng.randint(2, 9)}.</p>"
        "</article><footer>Copyright 2024 Example Notes. All rights reserved.</footer></body></html>"
    )
    return body.encode("utf-8")


def nonmath_page(topic: dict, index: int, rng: random.Random) -> bytes:
    """A plain page; some carry `$` prices, a shell prompt, or load MathJax with no formula."""
    head = (
        '<script src="https://cdn.example.org/mathjax/tex-chtml.js"></script>' if topic.get("mathjax") else ""
    )
    paras = "".join(
        f"<p>{s} {rng.choice(['', 'Read more below.', 'Share your thoughts.'])}</p>" for s in topic["prose"]
    )
    code = f"<pre><code>{html_lib.escape(topic['code'])}</code></pre>" if topic.get("code") else ""
    lang = "de" if topic["slug"].startswith("deutsche") else "en"
    body = (
        f"<html lang='{lang}'><head><meta charset='utf-8'><title>{topic['title']}</title>{head}</head><body>"
        f"<nav><a href='/'>Home</a> | <a href='/news'>News</a></nav><article><h1>{topic['title']}</h1>{paras}{code}"
        f"</article><footer>Published {index + 1} May 2024.</footer></body></html>"
    )
    return body.encode("utf-8")


def word_problems(rng: random.Random, n: int) -> list[dict]:
    """GSM8K-style word problems with worked steps and integer answers."""
    names = ["Ava", "Ben", "Chen", "Dana", "Eli", "Fatima", "Goran", "Hana"]
    items = ["apples", "pencils", "stickers", "marbles", "books", "cookies"]
    out = []
    for _ in range(n):
        name, item = rng.choice(names), rng.choice(items)
        a, b, c = rng.randint(3, 40), rng.randint(2, 9), rng.randint(1, 20)
        total = a * b - c
        out.append(
            {
                "question": f"{name} buys {b} bags with {a} {item} in each bag and gives away {c} {item}. "
                f"How many {item} does {name} have left?",
                "steps": f"{name} has {b} * {a} = {a * b} {item}. After giving away {c}, {a * b} - {c} = {total}.",
                "answer": str(total),
            }
        )
    return out
