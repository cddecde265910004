// The console's shell: the hash router, the session, and the one place errors are shown.

import { ApiError, session } from "./api.js";
import { h, clear } from "./dom.js";
import * as signin from "./signin.js";
import * as corpora from "./corpora.js";
import * as documents from "./documents.js";
import * as documentPage from "./document.js";
import * as search from "./search.js";
import * as ask from "./ask.js";
import * as events from "./events.js";
import * as usage from "./usage.js";

const ROUTES = [
  [/^\/signin$/, signin],
  [/^\/corpora$/, corpora],
  [/^\/corpora\/(\d+)$/, documents],
  [/^\/documents\/(\d+)$/, documentPage],
  [/^\/search$/, search],
  [/^\/ask$/, ask],
  [/^\/events$/, events],
  [/^\/usage$/, usage],
];

const main = () => globalThis.document.getElementById("main");
const errorBox = () => globalThis.document.getElementById("error");
let current = null; // the page's AbortController: its streams end when the user leaves it

/** Shows an error in the API's own words: the refusal in plain words, the message, the reason. */
export function showError(error) {
  if (error?.name === "AbortError") return;
  const box = errorBox();
  clear(box);
  if (error instanceof ApiError) {
    if (error.plain) box.append(h("strong", {}, error.plain), " ");
    box.append(error.message);
    if (error.reason) box.append(" ", h("code", { class: "reason" }, error.reason));
    const field = error.metadata.field;
    if (field) box.append(" ", h("span", { class: "muted" }, `(field: ${field})`));
    if (error.status === 401) session.token = "";
  } else {
    box.append(String(error?.message || error));
  }
  box.hidden = false;
}

export function clearError() {
  errorBox().hidden = true;
  clear(errorBox());
}

export function navigate(hash) {
  if (location.hash === hash) route();
  else location.hash = hash;
}

function parse() {
  const raw = location.hash.replace(/^#/, "") || "/corpora";
  const [path, query = ""] = raw.split("?");
  return { path, query: new URLSearchParams(query) };
}

function showSession() {
  const claims = session.claims;
  const signedIn = Boolean(session.token && claims);
  globalThis.document.getElementById("nav").hidden = !signedIn;
  globalThis.document.getElementById("sign-out").hidden = !signedIn;
  const who = globalThis.document.getElementById("who");
  who.textContent = signedIn ? `${claims.tenant} · ${claims.scope || "no scope"} · ${claims.clearance || "TENANT"}` : "";
}

async function route() {
  current?.abort();
  current = new AbortController();
  clearError();
  let { path, query } = parse();
  if (!session.token && path !== "/signin") path = "/signin";
  showSession();
  for (const link of globalThis.document.querySelectorAll("#nav a")) {
    const active = path.startsWith(link.getAttribute("href").slice(1));
    if (active) link.setAttribute("aria-current", "page");
    else link.removeAttribute("aria-current");
  }
  const found = ROUTES.find(([pattern]) => pattern.test(path));
  const root = clear(main());
  if (!found) {
    root.append(h("h1", {}, "Not found"), h("p", {}, h("a", { href: "#/corpora" }, "Back to the corpora")));
    return;
  }
  const [pattern, page] = found;
  const params = path.match(pattern).slice(1);
  const ctx = { root, params, query, signal: current.signal, showError, navigate, showSession };
  try {
    await page.render(ctx);
  } catch (error) {
    showError(error);
  }
  const heading = root.querySelector("h1");
  if (heading && !root.contains(globalThis.document.activeElement)) {
    heading.tabIndex = -1;
    heading.focus({ preventScroll: true });
  }
}

globalThis.document.getElementById("sign-out").addEventListener("click", () => {
  session.token = "";
  navigate("#/signin");
});
window.addEventListener("hashchange", route);
route();
