"""The web console in a real headless Chromium against `knowledge up`: the development sign-in, a
corpus created, a PDF (picked) and a DOCX (dropped) followed to searchable in the live list, a
search whose hit opens the text at its page with the passage marked, a streamed answer whose
citation opens its page, a delete that shows its tombstone, and the reach of another scope's
token (pasted in) without the corpus. No console errors anywhere; screenshots under the test's
tmp dir (and, with ``KNOWLEDGE_UPDATE_SCREENSHOT=1``, the README's ``docs/console.png``).

One stack for the module, no LLM configured: answers are extractive, streamed sentence by
sentence.
"""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import uuid
from pathlib import Path

import httpx
import pytest
from playwright.sync_api import Page, expect

from tests.support.browser import Console, chromium
from tests.support.documents import a_docx, text_pdf
from tests.support.stack import running_stack

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(600)]

ROOT = Path(__file__).resolve().parents[2]
README_SCREENSHOT = ROOT / "docs" / "console.png"
SEARCHABLE = "DOCUMENT_STATE_SEARCHABLE"
PAGES = [
    (
        "Leave policy\n\nEvery employee receives thirty paid vacation days per calendar year. "
        "Vacation requests go to the team lead two weeks ahead."
    ),
    (
        "Part-time staff\n\nPart-time staff receive vacation days in proportion to their contracted hours: "
        "someone working three days a week receives eighteen vacation days."
    ),
    "Expenses\n\nReceipts for travel expenses are submitted within thirty days of the trip.",
]
TRAVEL = "Travel policy: trains are preferred over flights for trips under five hundred kilometres."


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    with running_stack(tmp_path_factory.mktemp("console-stack")) as running:
        yield running


@pytest.fixture
def console(tmp_path):
    shots = tmp_path / "screenshots"
    shots.mkdir()
    return Console(shots)


@pytest.fixture
def page(console):
    with chromium() as browser:
        context = browser.new_context(viewport={"width": 1280, "height": 860})
        yield console.watch(context.new_page())
        context.close()
    assert console.errors == [], "the console logged errors:\n" + "\n".join(console.errors)


def dev_sign_in(page: Page, root: str, tenant: str, scope: str = "/") -> None:
    page.goto(root + "/")
    expect(page.get_by_role("heading", name="Sign in", exact=True)).to_be_visible()
    form = page.locator("#dev-sign-in")
    form.get_by_label("Tenant").fill(tenant)
    form.get_by_label("Scope").fill(scope)
    form.get_by_label("Clearance").select_option("TENANT")
    form.get_by_role("button", name="Sign in for development").click()
    expect(page.get_by_role("heading", name="Corpora", exact=True)).to_be_visible()
    expect(page.locator("#who")).to_contain_text(f"{tenant} · {scope}")


def create_corpus(page: Page, name: str, band: str = "") -> None:
    form = page.locator("#create-corpus")
    form.get_by_label("Name").fill(name)
    form.get_by_label("Description").fill(f"{name} for the console test")
    if band:
        form.get_by_label("Band").select_option(band)
    form.get_by_role("button", name="Create").click()
    expect(page.locator("#corpora").get_by_role("link", name=name, exact=True)).to_be_visible()


def bind(page: Page, name: str, scope: str) -> None:
    page.get_by_role("button", name=f"Bind {name}").click()
    dialog = page.get_by_role("dialog")
    dialog.get_by_label("Scope node").fill(scope)
    dialog.get_by_role("button", name="Bind").click()
    expect(page.locator("#corpora").get_by_role("link", name=name, exact=True)).to_have_count(0)


def drop_file(page: Page, selector: str, name: str, mime: str, data: bytes) -> None:
    """A drag and drop of one file onto the element, as a browser dispatches it."""
    transfer = page.evaluate_handle(
        """([name, mime, b64]) => {
            const bytes = Uint8Array.from(atob(b64), (c) => c.charCodeAt(0));
            const transfer = new DataTransfer();
            transfer.items.add(new File([bytes], name, { type: mime }));
            return transfer;
        }""",
        [name, mime, base64.b64encode(data).decode()],
    )
    page.dispatch_event(selector, "dragover", {"dataTransfer": transfer})
    page.dispatch_event(selector, "drop", {"dataTransfer": transfer})


def test_sign_in_upload_search_ask_and_delete_in_the_browser(stack, page, console, tmp_path):
    tenant = f"console-{uuid.uuid4().hex[:8]}"
    dev_sign_in(page, stack["root"], tenant)
    create_corpus(page, "Handbook", band="GENERAL")
    console.shot(page, "01-corpora")

    # The corpus's documents, live: a PDF from the file picker, a DOCX dropped on the zone.
    page.locator("#corpora").get_by_role("link", name="Handbook").click()
    expect(page.get_by_role("heading", name=re.compile("^Handbook"))).to_be_visible()
    expect(page.locator("h1 .live")).to_have_text("live")
    pdf = tmp_path / "handbook.pdf"
    pdf.write_bytes(text_pdf(PAGES))
    page.locator("#files").set_input_files(str(pdf))
    drop_file(
        page,
        "#drop",
        "travel.docx",
        "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
        a_docx(TRAVEL),
    )
    documents = page.locator("#documents tbody tr")
    expect(documents).to_have_count(2)
    expect(page.locator(f"#documents tr[data-state={SEARCHABLE}]")).to_have_count(2, timeout=180_000)
    row = page.locator("#documents tr", has_text="handbook.pdf")
    expect(row.locator("progress")).to_have_attribute("value", "1")
    expect(row).to_contain_text("searchable")
    console.shot(page, "02-documents")
    if os.environ.get("KNOWLEDGE_UPDATE_SCREENSHOT") == "1":
        shutil.copyfile(console.shot(page, "readme"), README_SCREENSHOT)

    # Search: the banner, ranks, page and section; a hit opens the text at its page, marked.
    page.get_by_role("navigation").get_by_role("link", name="Search").click()
    page.get_by_label("Query").fill("vacation days for part-time staff")
    page.get_by_label("Corpus").select_option(label="Handbook")
    page.get_by_label("Mode").select_option("SEARCH_MODE_HYBRID")
    page.get_by_role("button", name="Search").click()
    expect(page.locator("#relevance")).to_be_visible()
    hits = page.locator("#hits .hit")
    expect(hits.first).to_contain_text(re.compile(r"(vector|keyword) #\d"))
    hit = page.locator("#hits .hit h3 a", has_text="handbook.pdf — page 2")
    expect(hit.first).to_be_visible()
    console.shot(page, "03-search")
    hit.first.click()
    expect(page).to_have_url(re.compile(r"#/documents/\d+\?page=2&mark=1$"))
    expect(page.locator("#page-2")).to_have_text("Page 2")
    expect(page.locator("#passage")).to_contain_text("eighteen vacation days")
    expect(page.locator("#passage")).to_be_focused()
    console.shot(page, "04-text-at-page")
    page.get_by_role("button", name="Extract tables").click()  # document AI: a result card
    expect(page.locator(".results .result").first).to_be_visible()
    # Who may read it: a list naming the signed-in user (dev) and a group, then everyone again.
    expect(page.locator(".access-list")).to_have_text("Everyone who reaches the corpus")
    page.get_by_label("Access list").fill("user:dev\ngroup:hr")
    page.get_by_role("button", name="Save access").click()
    expect(page.locator(".access-list")).to_have_text("group:hr, user:dev")
    page.get_by_label("Access list").fill("")
    page.get_by_role("button", name="Save access").click()
    expect(page.locator(".access-list")).to_have_text("Everyone who reaches the corpus")

    # Ask: the answer arrives over query:stream, then its citations, each a link to its page.
    page.get_by_role("navigation").get_by_role("link", name="Ask").click()
    page.get_by_label("Question").fill("How many paid vacation days does every employee receive?")
    with page.expect_response(lambda r: r.url.endswith("/query:stream")) as streamed:
        page.get_by_role("button", name="Ask", exact=True).click()
    lines = [json.loads(line) for line in streamed.value.text().splitlines() if line.strip()]
    assert "started" in lines[0] and "done" in lines[-1], lines
    assert any("delta" in line for line in lines[1:-1]), "the answer should arrive in pieces"
    answer = page.locator("#conversation .turn .answer")
    expect(answer).not_to_have_attribute("aria-busy", "true")
    expect(answer).to_contain_text("thirty paid vacation days")
    citation = page.locator("#conversation .citations a").first
    expect(citation).to_have_text("[1]")
    console.shot(page, "05-ask")
    citation.click()
    expect(page).to_have_url(re.compile(r"#/documents/\d+\?page=\d+&mark=1$"))
    expect(page.locator("#passage")).to_be_visible()

    # Delete with a reason: the row leaves the live list and the tombstone is shown.
    page.get_by_role("link", name="Back to the corpus").click()
    expect(documents).to_have_count(2)
    page.get_by_role("button", name="Delete travel.docx").click()
    dialog = page.get_by_role("dialog")
    dialog.get_by_label("Reason").fill("superseded by the 2027 policy")
    dialog.get_by_role("button", name="Delete").click()
    tombstone = page.locator("#tombstone")
    expect(tombstone).to_contain_text("Deleted: travel.docx")
    expect(tombstone).to_contain_text("superseded by the 2027 policy")
    expect(documents).to_have_count(1)
    console.shot(page, "06-tombstone")


def test_a_token_of_another_scope_does_not_see_the_corpus(stack, page, console):
    tenant = f"console-{uuid.uuid4().hex[:8]}"
    dev_sign_in(page, stack["root"], tenant)
    create_corpus(page, "Engineering runbooks")
    bind(page, "Engineering runbooks", "workspace:eng")  # below the root: the root no longer reads it
    create_corpus(page, "Payroll")
    bind(page, "Payroll", "workspace:hr")

    # hr's token (the development sign-in) reads Payroll, never eng's corpus.
    page.get_by_role("button", name="Sign out").click()
    dev_sign_in(page, stack["root"], tenant, scope="workspace:hr")
    corpora = page.locator("#corpora")
    expect(corpora.get_by_role("link", name="Payroll")).to_be_visible()
    expect(corpora.get_by_role("link", name="Engineering runbooks")).to_have_count(0)
    console.shot(page, "07-other-scope")

    # eng's token, pasted in, reads its own.
    minted = httpx.post(f"{stack['root']}/console/dev-token", json={"tenant": tenant, "scope": "workspace:eng"})
    assert minted.status_code == 200, minted.text
    page.get_by_role("button", name="Sign out").click()
    page.get_by_label("Bearer token").fill(minted.json()["token"])
    page.get_by_role("button", name="Sign in", exact=True).click()
    expect(corpora.get_by_role("link", name="Engineering runbooks")).to_be_visible()
    expect(corpora.get_by_role("link", name="Payroll")).to_have_count(0)


def test_an_error_is_shown_in_the_apis_words(stack, page, console):
    console.expected_statuses.add(409)
    dev_sign_in(page, stack["root"], f"console-{uuid.uuid4().hex[:8]}")
    create_corpus(page, "Handbook")
    form = page.locator("#create-corpus")
    form.get_by_label("Name").fill("Handbook")
    form.get_by_role("button", name="Create").click()
    alert = page.get_by_role("alert")
    expect(alert).to_contain_text("CORPUS_ALREADY_EXISTS")
    expect(alert).to_contain_text("already exists")
