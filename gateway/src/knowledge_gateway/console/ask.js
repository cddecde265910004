// Ask: the answer streams in from query:stream; its [n] markers link to the cited page; the
// conversation's turns stay in the page and go with each question as its history (the service
// keeps none).

import { listAll, stream } from "./api.js";
import { field, h } from "./dom.js";
import { banner } from "./relevance.js";
import { corpusPicker, sourceLink } from "./search.js";

const turns = []; // {question, answer, citations, relevance, note}: this tab's conversation

function citationLabel(citation) {
  const where = [citation.page ? `page ${citation.page}` : "", citation.section ? `§ ${citation.section}` : ""].filter(Boolean).join(", ");
  return `${citation.filename || citation.document_ref || citation.document_id}${where ? `, ${where}` : ""}`;
}

function cite(citation, n) {
  return sourceLink(citation.document_id, citation.page, citation.excerpt, `[${n}]`);
}

/** The answer's text with each [n] that names a citation as a link to its page. */
function linked(answer, citations) {
  const parts = [];
  let at = 0;
  for (const found of answer.matchAll(/\[(\d+)\]/g)) {
    const citation = citations[Number(found[1]) - 1];
    if (!citation) continue;
    parts.push(answer.slice(at, found.index), cite(citation, found[1]));
    at = found.index + found[0].length;
  }
  parts.push(answer.slice(at));
  return parts;
}

function turnView(turn) {
  const view = h("article", { class: "turn card" }, h("p", { class: "question" }, h("strong", {}, "You: "), turn.question));
  const status = h("div", { class: "turn-status" });
  const answer = h("p", { class: "answer", "aria-busy": "true" });
  const sources = h("ol", { class: "citations" });
  view.append(status, answer, sources);
  const show = () => {
    status.replaceChildren(
      turn.relevance !== undefined ? banner(turn.relevance) : "",
      turn.condensed ? h("p", { class: "muted" }, `Searched for: ${turn.condensed}`) : "",
    );
    if (turn.done) {
      answer.removeAttribute("aria-busy");
      answer.replaceChildren(...linked(turn.answer, turn.citations));
      sources.replaceChildren(...turn.citations.map((c, i) => h("li", {}, cite(c, i + 1), " ", citationLabel(c))));
      if (turn.note) view.append(h("p", { class: "muted" }, turn.note));
    } else {
      answer.textContent = turn.answer;
    }
  };
  return { view, show };
}

export async function render(ctx) {
  const corpora = await listAll("/corpora", "corpora", { signal: ctx.signal });
  const question = h("textarea", { rows: 2, required: true });
  const corpus = corpusPicker(corpora);
  const log = h("div", { id: "conversation", "aria-live": "polite" });
  const views = turns.map((turn) => {
    const v = turnView(turn);
    v.show();
    return v.view;
  });
  log.append(...views);
  const submit = h("button", { type: "submit" }, "Ask");
  const form = h(
    "form",
    {
      class: "card",
      onsubmit: async (event) => {
        event.preventDefault();
        const history = turns.filter((t) => t.done).flatMap((t) => [
          { role: "TURN_ROLE_USER", text: t.question },
          { role: "TURN_ROLE_ASSISTANT", text: t.answer },
        ]);
        const turn = { question: question.value.trim(), answer: "", citations: [], done: false };
        const request = { query: turn.question };
        if (history.length) request.history = history;
        if (corpus.value) request.corpus_id = corpus.value;
        const { view, show } = turnView(turn);
        log.append(view);
        submit.disabled = true;
        try {
          await stream(
            "POST",
            "/query:stream",
            request,
            (message) => {
              if (message.started) {
                turn.relevance = message.started.relevance;
                turn.condensed = message.started.condensed_query;
              } else if (message.delta !== undefined) {
                turn.answer += message.delta;
              } else if (message.done) {
                Object.assign(turn, {
                  answer: message.done.answer || "",
                  citations: message.done.citations || [],
                  relevance: message.done.relevance,
                  note: [message.done.conversation_note, message.done.fallback_message].filter(Boolean).join(" "),
                  done: true,
                });
              }
              show();
            },
            { signal: ctx.signal },
          );
          if (turn.done) {
            turns.push(turn);
            form.reset();
          }
        } catch (error) {
          view.remove();
          ctx.showError(error);
        } finally {
          submit.disabled = false;
        }
      },
    },
    field("Question", question),
    field("Corpus", corpus),
    h("div", { class: "actions" }, submit, h("button", { type: "button", class: "quiet", onclick: () => { turns.length = 0; log.replaceChildren(); } }, "New conversation")),
  );
  question.addEventListener("keydown", (event) => {
    if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) form.requestSubmit();
  });
  ctx.root.append(h("h1", {}, "Ask"), log, form);
}
