// A corpus's documents, live from documents:watch: state, stage and progress as ingestion goes;
// uploads by drag and drop (or a file picker), a web page by URL; move and delete (the tombstone
// is shown as the API answers it).

import { call, listAll, stream, upload } from "./api.js";
import { bytes, confirmDialog, enumName, field, h, select, when } from "./dom.js";

const FINAL = new Set(["DOCUMENT_STATE_SEARCHABLE", "DOCUMENT_STATE_FAILED", "DOCUMENT_STATE_CANCELLED"]);
const RETRY_MS = 2000;

function state(doc) {
  return enumName(doc.state, "DOCUMENT_STATE_");
}

/** "embedding 12/40" -> [12, 40]: the k/n the stage names, else none. */
function steps(stage) {
  const found = /(\d+)\s*\/\s*(\d+)/.exec(stage || "");
  return found ? [Number(found[1]), Number(found[2])] : null;
}

function progress(doc) {
  const value = FINAL.has(doc.state) ? 1 : Number(doc.progress || 0);
  const k = steps(doc.stage);
  const label = k ? `${k[0]}/${k[1]}` : `${Math.round(value * 100)}%`;
  return h(
    "div",
    { class: "progress" },
    h("progress", { max: 1, value, "aria-label": `${doc.filename}: ${label}` }),
    h("span", { class: "muted" }, label),
  );
}

function tombstoneCard(tombstone) {
  return h(
    "section",
    { class: "card tombstone", "aria-live": "polite", id: "tombstone" },
    h("h2", {}, `Deleted: ${tombstone.filename || `document ${tombstone.document_id}`}`),
    h(
      "dl",
      {},
      [
        ["Document", tombstone.document_id],
        ["Reason", tombstone.reason || "(none given)"],
        ["Deleted by", tombstone.deleted_by],
        ["When", when(tombstone.delete_time)],
        ["Chunks", tombstone.chunk_count],
        ["Content hash", tombstone.content_hash],
        ["Removal", enumName(tombstone.removal_state, "REMOVAL_STATE_") || "pending"],
      ].flatMap(([k, v]) => [h("dt", {}, k), h("dd", {}, String(v ?? ""))]),
    ),
  );
}

export async function render(ctx) {
  const corpusId = ctx.params[0];
  const corpora = await listAll("/corpora", "corpora", { signal: ctx.signal });
  const corpus = corpora.find((c) => c.corpus_id === corpusId);
  if (!corpus) {
    ctx.root.append(h("h1", {}, "Corpus not found"), h("p", {}, "No such corpus is in your reach."));
    return;
  }
  const docs = new Map();
  const body = h("tbody");
  const live = h("span", { class: "live", role: "status" }, "connecting…");
  const notices = h("div", { class: "notices", "aria-live": "polite" });

  const move = async (doc) => {
    const target = select(
      corpora.filter((c) => c.corpus_id !== corpusId).map((c) => [c.corpus_id, c.name]),
      "",
    );
    if (!target.options.length) {
      ctx.showError(new Error("There is no other corpus in your reach to move it to."));
      return;
    }
    if (!(await confirmDialog(`Move ${doc.filename}`, field("To corpus", target), "Move"))) return;
    try {
      await call("POST", "/documents:move", { document_ids: [doc.document_id], target_corpus_id: target.value });
    } catch (error) {
      ctx.showError(error);
    }
  };
  const remove = async (doc) => {
    const reason = h("input", { autocomplete: "off", maxlength: 500 });
    const text = h("div", {}, h("p", {}, "It leaves every search and answer at once."), field("Reason", reason, "Kept in its tombstone."));
    if (!(await confirmDialog(`Delete ${doc.filename}?`, text, "Delete", { danger: true }))) return;
    try {
      const query = reason.value.trim() ? `?reason=${encodeURIComponent(reason.value.trim())}` : "";
      const answer = await call("DELETE", `/documents/${doc.document_id}${query}`);
      notices.querySelector("#tombstone")?.remove();
      notices.prepend(tombstoneCard(answer.tombstone || {}));
    } catch (error) {
      ctx.showError(error);
    }
  };

  const row = (doc) =>
    h(
      "tr",
      { dataset: { documentId: doc.document_id, state: doc.state } },
      h("th", { scope: "row" }, h("a", { href: `#/documents/${doc.document_id}` }, doc.filename || doc.source_url || doc.document_id)),
      h("td", {}, h("span", { class: `state state-${state(doc).replaceAll(" ", "-")}` }, state(doc))),
      h("td", {}, doc.error || doc.stage || ""),
      h("td", {}, progress(doc)),
      h("td", { class: "num" }, doc.chunk_count ?? 0),
      h("td", { class: "num" }, bytes(doc.size_bytes)),
      h(
        "td",
        { class: "row-actions" },
        h("button", { type: "button", class: "quiet", onclick: () => move(doc), "aria-label": `Move ${doc.filename}` }, "Move"),
        h("button", { type: "button", class: "quiet danger", onclick: () => remove(doc), "aria-label": `Delete ${doc.filename}` }, "Delete"),
      ),
    );
  const draw = () => {
    const rows = [...docs.values()].sort((a, b) => Number(a.document_id) - Number(b.document_id));
    body.replaceChildren(...rows.map(row));
    empty.hidden = rows.length > 0;
  };
  const empty = h("p", { class: "muted" }, "No documents yet: drop files below, or add a web page.");

  const watch = async () => {
    while (!ctx.signal.aborted) {
      docs.clear();
      try {
        await stream(
          "GET",
          `/corpora/${corpusId}/documents:watch`,
          undefined,
          (change) => {
            if (change.kind === "DOCUMENT_CHANGE_KIND_SYNCED") live.textContent = "live";
            else if (change.kind === "DOCUMENT_CHANGE_KIND_REMOVED") docs.delete(change.document_id);
            else if (change.document) docs.set(change.document_id, change.document);
            draw();
          },
          { signal: ctx.signal },
        );
        live.textContent = "reconnecting…";
      } catch (error) {
        if (ctx.signal.aborted) return;
        live.textContent = "disconnected";
        ctx.showError(error);
        if (error.status === 404 || error.status === 401 || error.status === 403) return;
      }
      await new Promise((resolve) => setTimeout(resolve, RETRY_MS));
    }
  };

  const uploads = h("ul", { class: "uploads", "aria-live": "polite" });
  const send = async (files) => {
    for (const file of files) {
      const item = h("li", {}, `${file.name}: uploading…`);
      uploads.prepend(item);
      try {
        const answer = await upload(corpusId, file);
        item.textContent = `${file.name}: stored, ${answer.status || "ingesting"}`;
      } catch (error) {
        item.textContent = `${file.name}: ${error.reason ? `${error.reason} — ` : ""}${error.message}`;
        item.classList.add("failed");
      }
    }
  };
  const picker = h("input", { type: "file", multiple: true, id: "files", class: "sr-only" });
  picker.addEventListener("change", () => {
    send([...picker.files]);
    picker.value = "";
  });
  const drop = h(
    "div",
    { class: "drop", id: "drop" },
    picker,
    h("label", { for: "files", class: "button" }, "Choose files"),
    h("span", { class: "muted" }, " or drop them here (PDF, Word, PowerPoint, Excel, HTML, text, images)"),
  );
  drop.addEventListener("dragover", (event) => {
    event.preventDefault();
    drop.classList.add("over");
  });
  drop.addEventListener("dragleave", () => drop.classList.remove("over"));
  drop.addEventListener("drop", (event) => {
    event.preventDefault();
    drop.classList.remove("over");
    send([...event.dataTransfer.files]);
  });

  const url = h("input", { type: "url", required: true, placeholder: "https://example.com/handbook", autocomplete: "off" });
  const urlForm = h(
    "form",
    {
      class: "inline",
      onsubmit: async (event) => {
        event.preventDefault();
        try {
          await call("POST", "/urls", { url: url.value.trim(), corpus_id: corpusId });
          urlForm.reset();
        } catch (error) {
          ctx.showError(error);
        }
      },
    },
    field("Web page", url),
    h("button", { type: "submit" }, "Add URL"),
  );

  ctx.root.append(
    h("p", { class: "crumbs" }, h("a", { href: "#/corpora" }, "Corpora"), " / "),
    h("h1", {}, corpus.name, " ", live),
    h("p", { class: "muted" }, `Band ${corpus.confidentiality || "TENANT"} · bound at ${corpus.scope || "/"}`),
    h("section", { class: "card", "aria-label": "Add documents" }, drop, uploads, urlForm),
    notices,
    empty,
    h(
      "table",
      { class: "list", id: "documents" },
      h("caption", { class: "sr-only" }, `Documents of ${corpus.name}, live`),
      h("thead", {}, h("tr", {}, ["Document", "State", "Stage", "Progress", "Chunks", "Size", h("span", { class: "sr-only" }, "Actions")].map((c) => h("th", { scope: "col" }, c)))),
      body,
    ),
  );
  watch();
}
