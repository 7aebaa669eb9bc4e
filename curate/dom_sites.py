"""Site chrome that main-content extraction keeps, removed from the DOM by the site's own element names.

StackExchange / MathOverflow question pages: resiliparse keeps the vote counts (a lone "18" before the question
and each answer, "1" before a comment), "You must log in to answer this question.", "Not the answer you're
looking for? Browse other questions tagged ...", and on other page states the answer form ("Your Answer", "Sign up
or log in", "Post as a guest", "Required, but never shown", "By clicking “Post Your Answer” ..."), "Hot Network
Questions" and the "Related" / "Linked" lists with their counts. Each is one element with a class or id of the
site's markup, so it goes as an element; no line of text is dropped by what it says (an answer may say anything).
Only pages that are StackExchange question pages (an `#answers` block and a post body of its markup) are touched:
other sites use some of these names (a WordPress comment form is `#post-form` too).

MediaWiki pages (Wikipedia and other wikis, recognised by the article container `#mw-content-text`): the
"[edit]" after each heading, "Jump to navigation / Jump to search", "From Wikipedia, the free encyclopedia",
navboxes, authority control, categories and "Retrieved from ..." go the same way. References, infoboxes and
math (`.mwe-math-element`) are content and stay. Other pages pay one lookup by id (~60 us, ~1% of a page's
extraction); the generator `<meta>` is not read: it adds a query on every page and every wiki skin has the id.
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


# What a MediaWiki page holds: the parsed article's container (desktop and mobile skins, 2008 to now).
_MW_CONTENT_ID = "mw-content-text"
# The wiki's chrome around and inside the article. `.navbox` is the collapsible link table at the foot of an
# article (not `.infobox`, not the `.vertical-navbox` sidebar); `.mw-references-wrap` (the references) is content.
_MW_CHROME = ", ".join(
    (
        ".mw-editsection",  # "[edit]" after each heading
        ".mw-jump-link",  # "Jump to navigation", "Jump to search"
        "#jump-to-nav",  # the same in markup from before 2018
        "#siteSub",  # "From Wikipedia, the free encyclopedia"
        "#contentSub",  # "(Redirected from ...)"
        ".navbox",
        ".mw-authority-control",
        "#catlinks",  # "Categories: ..."
        ".printfooter",  # "Retrieved from ..."
    )
)


def is_mediawiki_page(body) -> bool:
    """Whether a page body is rendered by MediaWiki (by its markup, not its URL: wikis live on any host)."""
    return body.get_element_by_id(_MW_CONTENT_ID) is not None


def is_stackexchange_page(body) -> bool:
    """Whether a page body is a StackExchange question page (by its markup, not its URL: mirrors keep it)."""
    if body.get_element_by_id(_SE_ANSWERS_ID) is None:
        return False
    return body.query_selector(_SE_POST_BODY) is not None


def drop_site_chrome(tree) -> int:
    """Remove the site chrome of a StackExchange question page (`_SE_CHROME`) or a MediaWiki page (`_MW_CHROME`)
    from a resiliparse HTMLTree in place; the number of elements removed (0 for any other page)."""
    body = tree.body
    if body is None:
        return 0
    if is_stackexchange_page(body):
        chrome = _SE_CHROME
    elif is_mediawiki_page(body):
        chrome = _MW_CHROME
    else:
        return 0
    removed = 0
    for node in body.query_selector_all(chrome).values():
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
