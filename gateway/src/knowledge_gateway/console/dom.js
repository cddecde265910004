// A few helpers to build the DOM without a framework: every text goes in as a text node, never
// as HTML, so nothing the API returns (file names, document text, answers) can inject markup.

let nextId = 0;

/** h("button", {type: "submit", onclick: fn}, "Save") — attributes, `on*` listeners, children. */
export function h(tag, props = {}, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(props || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key.startsWith("on") && typeof value === "function") el.addEventListener(key.slice(2), value);
    else if (key === "dataset") Object.assign(el.dataset, value);
    else if (key in el && typeof value !== "string") el[key] = value;
    else el.setAttribute(key, value === true ? "" : String(value));
  }
  append(el, children);
  return el;
}

export function append(el, children) {
  for (const child of children.flat(Infinity)) {
    if (child === undefined || child === null || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}

export function clear(el) {
  el.replaceChildren();
  return el;
}

/** A labelled control: the label names the input (for screen readers and for clicks). */
export function field(label, input, hint) {
  input.id ||= `f${++nextId}`;
  const parts = [h("label", { for: input.id }, label), input];
  if (hint) {
    const hintEl = h("small", { id: `${input.id}-hint`, class: "hint" }, hint);
    input.setAttribute("aria-describedby", hintEl.id);
    parts.push(hintEl);
  }
  return h("div", { class: "field" }, parts);
}

export function select(options, value) {
  return h("select", {}, options.map(([v, text]) => h("option", { value: v, selected: v === value }, text)));
}

export function when(time) {
  if (!time) return "";
  const date = new Date(time);
  return Number.isNaN(date.getTime()) ? String(time) : date.toLocaleString();
}

export function bytes(n) {
  const value = Number(n || 0);
  if (value < 1024) return `${value} B`;
  const units = ["KiB", "MiB", "GiB", "TiB"];
  let scaled = value / 1024;
  let unit = 0;
  while (scaled >= 1024 && unit < units.length - 1) {
    scaled /= 1024;
    unit += 1;
  }
  return `${scaled.toFixed(1)} ${units[unit]}`;
}

/** An enum's name without its prefix, in lower case: DOCUMENT_STATE_SEARCHABLE -> searchable. */
export function enumName(value, prefix) {
  return String(value || "").replace(prefix, "").toLowerCase().replaceAll("_", " ");
}

/**
 * A modal form (a native <dialog>: focus is trapped inside and Escape cancels it). Resolves true
 * when submitted, false when cancelled; the caller reads its own controls.
 */
export function confirmDialog(title, body, submitText, { danger = false } = {}) {
  return new Promise((resolve) => {
    const dialog = h(
      "dialog",
      { "aria-labelledby": `f${++nextId}` },
      h(
        "form",
        { method: "dialog" },
        h("h2", { id: `f${nextId}` }, title),
        body,
        h(
          "div",
          { class: "actions" },
          h("button", { type: "submit", value: "ok", class: danger ? "danger" : "" }, submitText),
          h("button", { type: "submit", value: "cancel", class: "quiet", formnovalidate: true }, "Cancel"),
        ),
      ),
    );
    dialog.addEventListener("close", () => {
      resolve(dialog.returnValue === "ok");
      dialog.remove();
    });
    document.body.append(dialog);
    dialog.showModal();
  });
}
