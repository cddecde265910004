// Usage: what the token's reach holds now, the quotas, and (with usage.admin) the month's tokens and cost.

import { call } from "./api.js";
import { bytes, h } from "./dom.js";

function money(value) {
  return Number(value || 0).toFixed(4);
}

function limit(value, format = String) {
  return value && Number(value) > 0 ? format(value) : "unlimited";
}

export async function render(ctx) {
  const usage = await call("GET", "/usage", undefined, { signal: ctx.signal });
  const quotas = usage.quotas || {};
  const rows = [
    ["Documents", usage.document_count, limit(quotas.max_documents)],
    ["Stored", bytes(usage.stored_bytes), limit(quotas.max_bytes, bytes)],
    ["Chunks", usage.chunk_count, limit(quotas.max_chunks)],
    ["Embedding tokens this month", usage.embedding_tokens ?? 0, limit(quotas.max_embedding_tokens_per_month)],
    ["Embedding cost", money(usage.embedding_cost), ""],
    ["LLM tokens this month", usage.llm_tokens ?? 0, ""],
    ["LLM cost", money(usage.llm_cost), limit(quotas.max_llm_cost_per_month, money)],
  ];
  ctx.root.append(
    h("h1", {}, "Usage"),
    h("p", { class: "muted" }, `Period ${usage.period}${usage.scope ? ` · what is held at ${usage.scope} and below` : " · the whole tenant"}`),
    h(
      "table",
      { class: "list", id: "usage" },
      h("thead", {}, h("tr", {}, ["", "Used", "Quota"].map((c) => h("th", { scope: "col" }, c)))),
      h("tbody", {}, rows.map(([name, used, quota]) => h("tr", {}, h("th", { scope: "row" }, name), h("td", { class: "num" }, String(used ?? 0)), h("td", { class: "num" }, quota)))),
    ),
  );
}
