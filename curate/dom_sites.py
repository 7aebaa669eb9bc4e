"""Site chrome that main-content extraction keeps, removed from the DOM by the site's own element names.

StackExchange / MathOverflow question pages: resiliparse keeps the vote counts (a lone "18" before the question
and each answer, "1" before a comment), "You must log in to answer this question.", "Not the answer you're
looking for? Browse other questions tagged ...", and on other page states the answer form ("Your Answer", "Sign up
or log in", "Post as a guest", "Required, but never shown", "By clicking “Post Your Answer” ..."), "Hot Network
Questions" and the "Related" / "Linked" lists with their counts. Each is one element with a class or id of the
site's markup, so it goes as an element; no line of text is dropped by what it says (an answer may say anything).
Only pages that are StackExchange question pages (an `#answers` block and a post body of its markup) are touched:
other sites use some of these names (a WordPress comment form is `#post-form` too).
"""

from __future__ import annotations

# What a StackExchange question page holds: the answers block (looked up by id first: on the other pages of a
# crawl that is the whole cost, about half a `query_selector`'s) and a post body (2019+ `.js-post-body`, before
# that `.post-text`).
_SE_ANSWERS_ID = "answers"
_SE_POST_BODY = ".js-post-body, .post-text"
# The site's chrome around the posts. None of these holds a post's text: the vote cell is the column left of
# the post body (votes, bookmark, accept mark), a comment's score is its own span, the notices and the answer
# form come after the answers, the sidebar is the right column.
_SE_CHROME = ", ".join(
    (
        ".votecell",  # vote column: count, up/down buttons (2019+ `.js-voting-container` inside it)
        ".js-voting-container",
        ".vote-count-post",  # the count in markup from before 2019
        ".comment-score",  # a comment's votes
        ".bottom-notice",  # "You must log in ...", "Not the answer you're looking for? Browse other questions ..."
        "#post-form",  # "Your Answer", "Sign up or log in", "Post as a guest", "Required, but never shown"
        ".js-add-answer-component",
        ".js-tos-disclaimer",  # "By clicking “Post Your Answer”, you agree to our terms of service ..."
        "#hot-network-questions",
        ".sidebar-related",  # "Related": questions with their vote counts
        ".sidebar-linked",
        "#sidebar",  # the right column: the above, featured meta posts, ads
        "#left-sidebar",  # site navigation
        '[itemprop="answerCount"]',  # hidden counts for search engines: "2 Answers 2", a lone "7" before comments
        '[itemprop="commentCount"]',
    )
)


def is_stackexchange_page(body) -> bool:
    """Whether a page body is a StackExchange question page (by its markup, not its URL: mirrors keep it)."""
    if body.get_element_by_id(_SE_ANSWERS_ID) is None:
        return False
    return body.query_selector(_SE_POST_BODY) is not None


def drop_site_chrome(tree) -> int:
    """Remove the site chrome (`_SE_CHROME`) of a StackExchange question page from a resiliparse HTMLTree in
    place; the number of elements removed (0 for any other page)."""
    body = tree.body
    if body is None or not is_stackexchange_page(body):
        return 0
    removed = 0
    for node in body.query_selector_all(_SE_CHROME).values():
        # an element inside one already removed is detached with it; its parent is still set, so check the body
        if node.parent is not None and _attached(node, body):
            node.parent.remove_child(node)
            removed += 1
    return removed


def _attached(node, body) -> bool:
    while node is not None:
        if node == body:
            return True
        node = node.parent
    return False
