// One document: its state, metadata and warnings; its text at a page with a passage marked (where
// a search hit or a citation led); document AI (classify, extract) with result cards.

import { call } from "./api.js";
import { bytes, enumName, field, h, when } from "./dom.js";

const MARK_KEY = "knowledge.mark";
const PAGE_MARKER = /\[Page (\d+)\]\n*/g;
const MIN_PROBE = 24;

/** Remembers the passage a link leads to, for the document page to mark. */
export function rememberPassage(text) {
  sessionStorage.setItem(MARK_KEY, text || "");
}

/** [start, end) of the passage in the text: its chunk may begin with an overlap the text omits. */
export function findPassage(text, passage) {
  const clean = (passage || "").replace(/^…|…$/g, "");
  for (let k = 0; k + MIN_PROBE <= clean.length; k += 8) {
    const start = text.indexOf(clean.slice(k, k + 160));
    if (start < 0) continue;
    let end = start;
    while (end < text.length && k + (end - start) < clean.length && text[end] === clean[k + (end - start)]) end += 1;
    return [start, end];
  }
  return null;
}

/** The text with its `[Page N]` markers as headings and the passage in a <mark>. */
function renderText(text, range) {
  const container = h("div", { class: "doc-text" });
  const cuts = [];
  for (const found of text.matchAll(PAGE_MARKER)) cuts.push({ at: found.index, end: found.index + found[0].length, page: found[1] });
  if (range) cuts.push({ at: range[0], open: true }, { at: range[1], close: true });
  cuts.sort((a, b) => a.at - b.at || (a.close ? -1 : 0));
  let target = container;
  let mark = null;
  let at = 0;
  const openMark = () => {
    mark = h("mark", { id: mark ? undefined : "passage" });
    container.append(mark);
    target = mark;
  };
  for (const cut of cuts) {
    if (cut.at > at) target.append(text.slice(at, cut.at));
    at = Math.max(at, cut.at);
    if (cut.open) openMark();
    else if (cut.close) {
      mark = null;
      target = container;
    } else {
      const inside = target !== container;
      container.append(h("h3", { class: "page-heading", id: `page-${cut.page}` }, `Page ${cut.page}`));
      at = cut.end;
      if (inside) {
        mark = h("mark");
        container.append(mark);
        target = mark;
      }
    }
  }
  target.append(text.slice(at));
  return container;
}

function card(result) {
  const c = result.card || {};
  return h(
    "article",
    { class: "card result" },
    h("h3", {}, c.title || c.kind || "Result"),
    c.markdown ? h("pre", { class: "markdown" }, c.markdown) : null,
    h("details", {}, h("summary", {}, "The API's answer"), h("pre", {}, JSON.stringify(result, null, 2))),
  );
}

async function loadText(documentId, page, passage, signal) {
  // A text page holds 25,000 characters: find the one with the document's page (or the passage).
  let number = 0;
  for (;;) {
    const answer = await call("GET", `/documents/${documentId}/text${number ? `?page=${number}` : ""}`, undefined, { signal });
    const text = answer.text || "";
    const hasPage = !page || text.includes(`[Page ${page}]`);
    const range = passage ? findPassage(text, passage) : null;
    if ((hasPage && (range || !passage)) || !answer.next_page) return { answer, text, range };
    number = answer.next_page;
  }
}

/** Who may read the document: its access list (empty: everyone who reaches the corpus), and a
 * form to change it (document.share), one principal per line. */
function access(doc, documentId, ctx) {
  const listed = doc.principals || [];
  const shown = h("p", { class: "access-list" }, listed.length ? listed.join(", ") : "Everyone who reaches the corpus");
  const input = h("textarea", { rows: 3, name: "principals", placeholder: "user:ana\ngroup:hr" }, listed.join("\n"));
  const form = h(
    "form",
    {
      onsubmit: async (event) => {
        event.preventDefault();
        const principals = input.value.split("\n").map((line) => line.trim()).filter(Boolean);
        try {
          const answer = await call("POST", `/documents/${documentId}:setAccess`, { principals });
          const now = (answer.document || {}).principals || principals;
          shown.textContent = now.length ? now.join(", ") : "Everyone who reaches the corpus";
        } catch (error) {
          ctx.showError(error);
        }
      },
    },
    field("Access list", input, "One principal per line (user:<name> or group:<name>); empty: everyone who reaches the corpus."),
    h("button", { type: "submit" }, "Save access"),
  );
  return h("section", { "aria-label": "Access" }, h("h2", {}, "Who may read it"), shown, form);
}

export async function render(ctx) {
  const documentId = ctx.params[0];
  const page = ctx.query.get("page");
  const passage = ctx.query.get("mark") ? sessionStorage.getItem(MARK_KEY) : "";
  const doc = await call("GET", `/documents/${documentId}`, undefined, { signal: ctx.signal });
  const results = h("div", { class: "results", "aria-live": "polite" });
  const run = (label, path) =>
    h(
      "button",
      {
        type: "button",
        onclick: async (event) => {
          const button = event.currentTarget;
          button.disabled = true;
          try {
            results.prepend(card(await call("POST", `/documents/${documentId}${path}`, {})));
          } catch (error) {
            ctx.showError(error);
          } finally {
            button.disabled = false;
          }
        },
      },
      label,
    );
  const metadata = Object.entries(doc.metadata || {});
  ctx.root.append(
    h("p", { class: "crumbs" }, h("a", { href: `#/corpora/${doc.corpus_id}` }, "Back to the corpus")),
    h("h1", {}, doc.filename || doc.source_url || `Document ${documentId}`),
    h(
      "dl",
      { class: "facts" },
      [
        ["State", enumName(doc.state, "DOCUMENT_STATE_")],
        ["Stage", doc.stage],
        ["Chunks", doc.chunk_count],
        ["Size", bytes(doc.size_bytes)],
        ["Type", doc.mime_type],
        ["Read by", doc.extractor],
        ["OCR pages", doc.ocr_page_count || ""],
        ["Source", doc.source_url],
        ["Created", when(doc.create_time)],
        ["Error", doc.error],
      ]
        .filter(([, v]) => v !== undefined && v !== "" && v !== null)
        .flatMap(([k, v]) => [h("dt", {}, k), h("dd", {}, String(v))]),
    ),
    metadata.length
      ? h("section", {}, h("h2", {}, "Metadata"), h("dl", { class: "facts" }, metadata.flatMap(([k, v]) => [h("dt", {}, k), h("dd", {}, JSON.stringify(v))])))
      : "",
    access(doc, documentId, ctx),
    (doc.warnings || []).length ? h("section", { class: "warnings" }, h("h2", {}, "Warnings"), h("ul", {}, doc.warnings.map((w) => h("li", {}, w)))) : "",
    h("section", { "aria-label": "Document AI" }, h("h2", {}, "Document AI"), h("div", { class: "actions" }, run("Classify", ":classify"), run("Extract tables", ":extract")), results),
  );
  const textSection = h("section", { id: "text", "aria-label": "Text" }, h("h2", {}, page ? `Text, page ${page}` : "Text"));
  ctx.root.append(textSection);
  if (doc.state !== "DOCUMENT_STATE_SEARCHABLE") {
    textSection.append(h("p", { class: "muted" }, "The text is shown once the document is searchable."));
    return;
  }
  const { answer, text, range } = await loadText(documentId, page, passage, ctx.signal);
  if (answer.page_count) textSection.append(h("p", { class: "muted" }, `Text page ${answer.page} of ${answer.page_count}`));
  textSection.append(renderText(text, range));
  const target = (range && textSection.querySelector("#passage")) || (page && textSection.querySelector(`#page-${page}`));
  if (target) {
    target.tabIndex = -1;
    target.scrollIntoView({ block: "center" });
    target.focus({ preventScroll: true });
  }
}
