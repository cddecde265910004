// Events: a live tail of the tenant's events in the token's reach, newest first.

import { stream } from "./api.js";
import { h, when } from "./dom.js";

const KEEP = 200;
const RETRY_MS = 2000;

export async function render(ctx) {
  const list = h("ol", { class: "events", id: "events", reversed: true });
  const live = h("span", { class: "live", role: "status" }, "connecting…");
  let cursor = "";
  ctx.root.append(h("h1", {}, "Events ", live), h("p", { class: "muted" }, "Every change to the documents and corpora you read, as it commits."), list);
  const follow = async () => {
    while (!ctx.signal.aborted) {
      try {
        live.textContent = "live";
        await stream(
          "GET",
          `/events?after=${encodeURIComponent(cursor)}`,
          undefined,
          (event) => {
            cursor = event.cursor || cursor;
            if (event.type === "stream.heartbeat") return;
            const details = [
              event.document_id ? `document ${event.document_id}` : "",
              event.corpus_id ? `corpus ${event.corpus_id}` : "",
              event.chunk_count ? `${event.chunk_count} chunks` : "",
              event.reason || "",
            ].filter(Boolean);
            list.prepend(h("li", {}, h("code", {}, event.type), " ", details.join(" · "), " ", h("time", { class: "muted", datetime: event.time || "" }, when(event.time))));
            while (list.children.length > KEEP) list.lastChild.remove();
          },
          { signal: ctx.signal },
        );
      } catch (error) {
        if (ctx.signal.aborted) return;
        live.textContent = "disconnected";
        ctx.showError(error);
        if ([400, 401, 403].includes(error.status)) return;
      }
      await new Promise((resolve) => setTimeout(resolve, RETRY_MS));
    }
  };
  follow();
}
