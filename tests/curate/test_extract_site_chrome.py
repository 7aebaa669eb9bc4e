"""StackExchange / MathOverflow chrome (vote counts, "You must log in ...", "Not the answer you're looking for?",
the answer form, "Hot Network Questions", "Related") is removed by its elements; the posts and comments stay."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from resiliparse.parse.html import HTMLTree

from curate.dom_sites import drop_site_chrome
from curate.extract import extract
from curate.extract_eval import formula_recall, gold_formulas, load_gold

SHARED = Path(__file__).resolve().parents[2].parent / "shared" / "data"
GOLD = SHARED / "extraction_gold" / "pages.jsonl"
WORLDBUILDING = SHARED / "html" / "math" / "llmwebkit__stackexchange_1_span-math-container_latex_mathjax.html"
CHROME = (
    "You must log in to answer",
    "Not the answer you're looking for",
    "Browse other questions tagged",
    "Hot Network Questions",
    "Your Answer",
    "Sign up or log in",
    "Post as a guest",
    "Required, but never shown",
    "Post Your Answer",
)
_LONE_NUMBER = re.compile(r"^[ \t•]*-?\d+[ \t]*$", re.M)


@pytest.fixture(scope="module")
def se_pages():
    if not GOLD.is_file() or not WORLDBUILDING.is_file():
        pytest.skip(f"StackExchange pages not found under {SHARED}: ../shared/data not found")
    gold = {p["name"]: p for p in load_gold(GOLD)}
    return {
        "math.stackexchange": gold["math_mathjax_latex_5"],
        "mathoverflow": gold["math_mathjax_latex_6"],
        "worldbuilding": {"html": WORLDBUILDING.read_text(encoding="utf-8"), "url": None},
    }


# On these pages every lone number on a line (after a comment's bullet too) is a vote or hidden count.
@pytest.mark.parametrize("site", ["math.stackexchange", "mathoverflow", "worldbuilding"])
def test_real_pages_lose_their_chrome_and_keep_posts_and_comments(se_pages, site):
    page = se_pages[site]
    text = extract(page["html"], page["url"])
    assert not [c for c in CHROME if c in text]
    assert not _LONE_NUMBER.findall(text), _LONE_NUMBER.findall(text)
    assert "Commented " in text  # the comments stay, without their scores
    assert re.search(r"^## \d+ Answers?$", text, re.M)  # the answers' header stays, once counted
    if "gold_content_list" in page:
        assert formula_recall(text, gold_formulas(page)) == 1.0


def test_all_answers_stay(se_pages):
    text = extract(se_pages["math.stackexchange"]["html"], se_pages["math.stackexchange"]["url"])
    assert "By definition," in text and "Yes, it does" in text  # both answers
    assert text.startswith("If $f(x,y)$ is a joint pdf")  # no vote count before the question


def test_the_clean_engine_loses_the_chrome_too(se_pages):
    page = se_pages["worldbuilding"]
    text = extract(page["html"], None, engine="clean")
    assert text.strip() and not [c for c in CHROME if c in text]


# A question page as served to a visitor who may answer (2023 markup, cut down): the answer form and the sidebar.
MODERN = """<html><body>
<div id="left-sidebar"><nav><a href="/">Home</a> <a href="/questions">Questions</a></nav></div>
<div id="content"><div id="question-header"><h1>Sum of a geometric series</h1></div>
<div id="question" class="question js-question"><div class="post-layout">
 <div class="votecell post-layout--left"><div class="js-voting-container"><button>Up</button>
  <div class="js-vote-count" itemprop="upvoteCount">12</div><button>Down</button></div></div>
 <div class="postcell post-layout--right"><div class="s-prose js-post-body" itemprop="text">
  <p>How do I find the sum of the series 1 + 1/2 + 1/4 + 1/8 + ... ? I tried writing out partial sums but I am
  not sure how to take the limit of them, and my textbook only shows the formula without any derivation.</p>
 </div></div></div></div>
<div id="answers"><div id="answers-header"><h2 data-answercount="1">1 Answer
 <span style="display:none;" itemprop="answerCount">1</span></h2></div>
<div class="answer js-answer"><div class="post-layout">
 <div class="votecell post-layout--left"><div class="js-voting-container"><div class="js-vote-count">7</div></div></div>
 <div class="answercell post-layout--right"><div class="s-prose js-post-body" itemprop="text">
  <p>The partial sums are 2 - 1/2^n, which tend to 2 as n grows, so the series converges and its sum is 2.
  More generally a geometric series with ratio r, |r| &lt; 1, and first term a has the sum a/(1 - r).</p>
  <p>2</p>
 </div>
 <div class="comments"><ul class="comments-list"><li class="comment"><div class="comment-score"><span>3</span></div>
  <div class="comment-text"><span class="comment-copy">Nice derivation, thanks.</span></div></li></ul></div>
 </div></div></div>
<form id="post-form" class="js-add-answer-component post-form" method="post" action="/questions/1/answer/submit">
 <h2 class="space">Your Answer</h2><div class="wmd-container"><textarea name="post-text"></textarea></div>
 <div class="js-login-container"><h2>Sign up or log in</h2><p>Sign up using Google</p><p>Sign up using Email
 and Password</p><h2>Post as a guest</h2><label>Name</label><input name="display-name"><label>Email</label>
 <p>Required, but never shown</p></div>
 <button>Post Your Answer</button><div class="js-tos-disclaimer">By clicking “Post Your Answer”, you agree to our
 terms of service and acknowledge you have read our privacy policy.</div></form>
<h2 class="bottom-notice">Not the answer you're looking for? Browse other questions tagged
 <a class="post-tag">sequences-and-series</a>.</h2>
</div></div>
<div id="sidebar"><div class="module sidebar-related"><h4 id="h-related">Related</h4><div class="related">
 <div class="spacer"><a><div class="answer-votes">4</div></a><a>Sum of an infinite geometric series</a></div>
 <div class="spacer"><a><div class="answer-votes">17</div></a><a>Why does 0.999... equal 1?</a></div></div></div>
 <div id="hot-network-questions" class="module tex2jax_ignore"><h4>Hot Network Questions</h4><ul>
 <li><a>Is every prime the sum of two squares in some ring?</a></li><li><a>A riddle about hats</a></li></ul></div>
</div></body></html>"""


@pytest.mark.parametrize("engine", ["fast", "clean"])
def test_answer_form_and_sidebar_go(engine):
    text = extract(MODERN, "https://math.stackexchange.com/questions/1", engine=engine)
    assert "The partial sums are 2 - 1/2^n" in text
    assert not [c for c in CHROME if c in text]
    for chrome in ("Hot Network", "Related", "A riddle about hats", "0.999", "By clicking"):
        assert chrome not in text
    # the answer's own lone "2" stays; the vote counts 12 and 7 and the comment's 3 go
    assert [m.strip() for m in _LONE_NUMBER.findall(text)] == ["2"]


def test_other_sites_are_left_alone():
    # a blog whose comment form and notices share the names: nothing goes
    blog = MODERN.replace('<div id="answers">', '<div id="comments">')
    tree = HTMLTree.parse(blog)
    assert drop_site_chrome(tree) == 0
    assert "## Your Answer" in extract(blog, None)
