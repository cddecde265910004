// Corpora: those in the token's reach, created (with a band) at its scope node, bound to a node
// below it, deleted.

import { call, listAll } from "./api.js";
import { confirmDialog, field, h, select } from "./dom.js";

const BANDS = [
  ["", "Default (TENANT)"],
  ["GENERAL", "GENERAL"],
  ["TENANT", "TENANT"],
  ["CONFIDENTIAL", "CONFIDENTIAL"],
  ["RESTRICTED", "RESTRICTED"],
];

function row(ctx, corpus, refresh) {
  const bind = async () => {
    const scope = h("input", { required: true, value: corpus.scope && corpus.scope !== "/" ? corpus.scope : "", autocomplete: "off" });
    const body = field("Scope node", scope, "Your own node or one below it, e.g. workspace:eng");
    if (!(await confirmDialog(`Bind ${corpus.name}`, body, "Bind"))) return;
    try {
      await call("POST", `/corpora/${corpus.corpus_id}:bind`, { scope: scope.value.trim() });
      await refresh();
    } catch (error) {
      ctx.showError(error);
    }
  };
  const remove = async () => {
    const withDocuments = h("input", { type: "checkbox" });
    const body = h(
      "div",
      {},
      h("p", {}, `The corpus leaves every reach at once; each of its documents gets a tombstone.`),
      h("div", { class: "check" }, withDocuments, h("label", { for: (withDocuments.id = `del-${corpus.corpus_id}`) }, "Delete its documents too")),
    );
    if (!(await confirmDialog(`Delete ${corpus.name}?`, body, "Delete", { danger: true }))) return;
    try {
      await call("DELETE", `/corpora/${corpus.corpus_id}${withDocuments.checked ? "?delete_documents=true" : ""}`);
      await refresh();
    } catch (error) {
      ctx.showError(error);
    }
  };
  return h(
    "tr",
    { dataset: { corpusId: corpus.corpus_id } },
    h("th", { scope: "row" }, h("a", { href: `#/corpora/${corpus.corpus_id}` }, corpus.name)),
    h("td", {}, corpus.description || ""),
    h("td", {}, h("span", { class: `band band-${(corpus.confidentiality || "TENANT").toLowerCase()}` }, corpus.confidentiality || "TENANT")),
    h("td", {}, h("code", {}, corpus.scope || "/")),
    h("td", { class: "num" }, corpus.document_count ?? 0),
    h("td", { class: "num" }, corpus.chunk_count ?? 0),
    h(
      "td",
      { class: "row-actions" },
      h("button", { type: "button", class: "quiet", onclick: bind, "aria-label": `Bind ${corpus.name}` }, "Bind"),
      h("button", { type: "button", class: "quiet danger", onclick: remove, "aria-label": `Delete ${corpus.name}` }, "Delete"),
    ),
  );
}

export async function render(ctx) {
  const body = h("tbody");
  const table = h(
    "table",
    { class: "list", id: "corpora" },
    h("caption", { class: "sr-only" }, "Corpora in your reach"),
    h("thead", {}, h("tr", {}, ["Name", "Description", "Band", "Scope", "Documents", "Chunks", h("span", { class: "sr-only" }, "Actions")].map((c) => h("th", { scope: "col" }, c)))),
    body,
  );
  const empty = h("p", { class: "muted", hidden: true }, "No corpus in your reach yet: create one.");
  const refresh = async () => {
    const found = await listAll("/corpora", "corpora", { signal: ctx.signal });
    body.replaceChildren(...found.map((c) => row(ctx, c, refresh)));
    empty.hidden = found.length > 0;
    table.hidden = found.length === 0;
  };
  const name = h("input", { required: true, maxlength: 200, autocomplete: "off" });
  const description = h("input", { autocomplete: "off" });
  const band = select(BANDS, "");
  const create = h(
    "form",
    {
      class: "card inline",
      id: "create-corpus",
      onsubmit: async (event) => {
        event.preventDefault();
        const request = { name: name.value.trim() };
        if (description.value.trim()) request.description = description.value.trim();
        if (band.value) request.confidentiality = band.value;
        try {
          await call("POST", "/corpora", request);
          create.reset();
          await refresh();
        } catch (error) {
          ctx.showError(error);
        }
      },
    },
    h("h2", {}, "New corpus"),
    field("Name", name),
    field("Description", description),
    field("Band", band),
    h("button", { type: "submit" }, "Create"),
  );
  ctx.root.append(h("h1", {}, "Corpora"), empty, table, create);
  await refresh();
}
