// The public REST API, with the signed-in user's bearer token, and nothing else.

export const BASE = "/api/v1/knowledge";
const TOKEN_KEY = "knowledge.token";

// The refusals (knowledge.v1.RefusalReason) in plain words; every other error shows the API's
// own message with its reason.
const PLAIN = {
  FEATURE_DISABLED: "An operator has switched this feature, or this tenant, off.",
  QUOTA_EXHAUSTED: "A quota of this tenant is used up.",
  BUDGET_EXHAUSTED: "This tenant's model budget for the month is used up.",
  CAPABILITY_MISSING: "Your token does not allow this.",
  SCOPE_UNRESOLVED: "Your token names no scope this tenant has, so nothing can be read.",
  INDEXING: "This document is still being ingested: try again when it is searchable.",
  APPROVAL_REQUIRED: "This needs a person's approval first.",
  RUNTIME_UNAVAILABLE: "The model behind this is down or not configured.",
  PLAN_REQUIRED: "This tenant's plan does not include this feature.",
  TOKEN_EXPIRED: "Your token has expired: sign in again.",
  TOKEN_INVALID: "The token was not accepted: sign in again.",
  TOKEN_MISSING: "Sign in first.",
};

export class ApiError extends Error {
  constructor(status, body) {
    const info = (body?.details || []).find((d) => String(d["@type"] || "").endsWith("ErrorInfo")) || {};
    super(body?.message || `the request failed (HTTP ${status})`);
    this.status = status;
    this.reason = info.reason || "";
    this.metadata = info.metadata || {};
  }

  /** What a person reads: the plain words of a refusal, then the API's message and reason. */
  get plain() {
    return PLAIN[this.reason] || "";
  }
}

export const session = {
  get token() {
    return sessionStorage.getItem(TOKEN_KEY) || "";
  },
  set token(value) {
    if (value) sessionStorage.setItem(TOKEN_KEY, value);
    else sessionStorage.removeItem(TOKEN_KEY);
  },
  /** The token's claims, read for display only: the gateway and the services verify it. */
  get claims() {
    try {
      const part = this.token.split(".")[1].replaceAll("-", "+").replaceAll("_", "/");
      return JSON.parse(atob(part.padEnd(part.length + ((4 - (part.length % 4)) % 4), "=")));
    } catch {
      return null;
    }
  },
};

function headers(extra = {}) {
  return { authorization: `Bearer ${session.token}`, ...extra };
}

async function failure(response) {
  let body = null;
  try {
    body = await response.json();
  } catch {
    body = { message: `${response.status} ${response.statusText}` };
  }
  return new ApiError(response.status, body);
}

/** One call: the answer's JSON, or an ApiError with the ErrorInfo's reason and message. */
export async function call(method, path, body, { signal } = {}) {
  const init = { method, headers: headers(), signal };
  if (body !== undefined) {
    init.body = JSON.stringify(body);
    init.headers["content-type"] = "application/json";
  }
  const response = await fetch(BASE + path, init);
  if (!response.ok) throw await failure(response);
  const text = await response.text();
  return text ? JSON.parse(text) : {};
}

/** An upload as a browser's form: corpus first, then the file, streamed by the browser. */
export async function upload(corpusId, file, { signal } = {}) {
  const form = new FormData();
  form.append("corpus_id", corpusId);
  form.append("file", file, file.name);
  const response = await fetch(`${BASE}/upload`, { method: "POST", headers: headers(), body: form, signal });
  if (!response.ok) throw await failure(response);
  return response.json();
}

/**
 * A server stream as the gateway sends it: one JSON object per line, handed to `onObject` as each
 * arrives. Resolves when the stream ends; rejects with an ApiError when it fails (before or after
 * its first object), or with the AbortError of `signal`.
 */
export async function stream(method, path, body, onObject, { signal } = {}) {
  const init = { method, headers: headers(), signal };
  if (body !== undefined) {
    init.body = JSON.stringify(body);
    init.headers["content-type"] = "application/json";
  }
  const response = await fetch(BASE + path, init);
  if (!response.ok) throw await failure(response);
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  let pending = "";
  const handle = (line) => {
    if (!line.trim()) return;
    const object = JSON.parse(line);
    // A stream that fails after it began ends with the status instead of a message.
    if (object && typeof object.code === "number" && "message" in object && !("kind" in object)) {
      throw new ApiError(response.status === 200 ? 500 : response.status, object);
    }
    onObject(object);
  };
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    pending += value;
    let newline;
    while ((newline = pending.indexOf("\n")) >= 0) {
      handle(pending.slice(0, newline));
      pending = pending.slice(newline + 1);
    }
  }
  handle(pending);
}

/** The console's settings from the gateway: whether the development sign-in is routed. */
export async function consoleConfig() {
  const response = await fetch("/console/config.json");
  return response.ok ? response.json() : { dev_sign_in: false };
}

export async function devToken(tenant, scope, clearance) {
  const response = await fetch("/console/dev-token", {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ tenant, scope, clearance }),
  });
  if (!response.ok) throw await failure(response);
  return response.json();
}

/** Every page of a list RPC's answer (`key` names its repeated field). */
export async function listAll(path, key, { signal } = {}) {
  const found = [];
  let token = "";
  do {
    const sep = path.includes("?") ? "&" : "?";
    const page = await call("GET", `${path}${sep}page_size=200${token ? `&page_token=${encodeURIComponent(token)}` : ""}`, undefined, { signal });
    found.push(...(page[key] || []));
    token = page.next_page_token || "";
  } while (token);
  return found;
}
