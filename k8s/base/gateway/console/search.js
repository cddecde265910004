// Search: mode, corpus and filter; the relevance banner; each hit with its vector and lexical
// ranks, page and section, opening the document's text at that page with the passage marked.

import { call, listAll } from "./api.js";
import { field, h, select } from "./dom.js";
import { rememberPassage } from "./document.js";
import { banner } from "./relevance.js";

const MODES = [
  ["SEARCH_MODE_HYBRID", "Hybrid (vector + keyword)"],
  ["SEARCH_MODE_VECTOR", "Vector"],
  ["SEARCH_MODE_LEXICAL", "Keyword"],
];

export function corpusPicker(corpora, value = "") {
  return select([["", "Every corpus in reach"], ...corpora.map((c) => [c.corpus_id, c.name])], value);
}

export function sourceLink(documentId, page, passage, label) {
  return h(
    "a",
    {
      href: `#/documents/${documentId}?${page ? `page=${page}&` : ""}mark=1`,
      onclick: () => rememberPassage(passage),
    },
    label,
  );
}

function ranks(hit) {
  const parts = [];
  if (hit.vector_rank) parts.push(`vector #${hit.vector_rank}`);
  if (hit.lexical_rank) parts.push(`keyword #${hit.lexical_rank}`);
  return parts.join(" · ") || "—";
}

function hitItem(hit) {
  const where = [hit.page ? `page ${hit.page}` : "", hit.section ? `§ ${hit.section}` : ""].filter(Boolean).join(", ");
  return h(
    "li",
    { class: "hit card" },
    h("h3", {}, sourceLink(hit.document_id, hit.page, hit.content, `${hit.filename || hit.document_ref || hit.document_id}${where ? ` — ${where}` : ""}`)),
    h("p", { class: "muted ranks" }, `${ranks(hit)} · score ${Number(hit.score || 0).toFixed(3)}`),
    h("p", { class: "excerpt" }, (hit.content || "").slice(0, 400)),
  );
}

export async function render(ctx) {
  const corpora = await listAll("/corpora", "corpora", { signal: ctx.signal });
  const query = h("input", { type: "search", required: true, autocomplete: "off", value: ctx.query.get("q") || "" });
  const corpus = corpusPicker(corpora, ctx.query.get("corpus") || "");
  const mode = select(MODES, "SEARCH_MODE_HYBRID");
  const filter = h("input", { autocomplete: "off", placeholder: 'metadata.team = "hr"' });
  const topK = h("input", { type: "number", min: 1, max: 100, value: 10 });
  const out = h("div", { id: "hits", "aria-live": "polite" });
  const form = h(
    "form",
    {
      class: "card",
      role: "search",
      onsubmit: async (event) => {
        event.preventDefault();
        const request = { query: query.value.trim(), mode: mode.value, top_k: Number(topK.value) || 10 };
        if (corpus.value) request.corpus_id = corpus.value;
        if (filter.value.trim()) request.filter = filter.value.trim();
        out.replaceChildren(h("p", { class: "muted" }, "Searching…"));
        try {
          const answer = await call("POST", "/search", request, { signal: ctx.signal });
          const hits = answer.results || [];
          out.replaceChildren(
            banner(answer.relevance, hits.length),
            ...(answer.warnings || []).map((w) => h("p", { class: "warning" }, w)),
            h("ol", { class: "hits" }, hits.map(hitItem)),
          );
        } catch (error) {
          out.replaceChildren();
          ctx.showError(error);
        }
      },
    },
    field("Query", query),
    h("div", { class: "row" }, field("Corpus", corpus), field("Mode", mode), field("Results", topK)),
    field("Filter", filter, "Google's filter language (AIP-160): metadata.KEY, filename, state, create_time…"),
    h("button", { type: "submit" }, "Search"),
  );
  ctx.root.append(h("h1", {}, "Search"), form, out);
}
