// Sign-in: paste a token, or (on the local stack's development keys only) ask for one.

import { consoleConfig, devToken, session } from "./api.js";
import { field, h, select } from "./dom.js";

const BANDS = ["GENERAL", "TENANT", "CONFIDENTIAL", "RESTRICTED"];

function signedIn(ctx, token) {
  session.token = token;
  ctx.showSession();
  ctx.navigate("#/corpora");
}

export async function render(ctx) {
  const pasted = h("textarea", { rows: 4, required: true, spellcheck: false, autocomplete: "off" });
  const pasteForm = h(
    "form",
    {
      class: "card",
      onsubmit: (event) => {
        event.preventDefault();
        signedIn(ctx, pasted.value.trim());
      },
    },
    h("h2", {}, "With a token"),
    field("Bearer token", pasted, "A JWT from your identity provider (or `knowledge dev-token`)."),
    h("button", { type: "submit" }, "Sign in"),
  );
  ctx.root.append(h("h1", {}, "Sign in"), pasteForm);
  const config = await consoleConfig();
  if (!config.dev_sign_in) return;
  const tenant = h("input", { value: "acme", required: true, autocomplete: "off" });
  const scope = h("input", { value: "/", required: true, autocomplete: "off" });
  const clearance = select(BANDS.map((b) => [b, b]), "TENANT");
  const devForm = h(
    "form",
    {
      class: "card",
      id: "dev-sign-in",
      onsubmit: async (event) => {
        event.preventDefault();
        try {
          const answer = await devToken(tenant.value.trim(), scope.value.trim(), clearance.value);
          signedIn(ctx, answer.token);
        } catch (error) {
          ctx.showError(error);
        }
      },
    },
    h("h2", {}, "Development sign-in"),
    h("p", { class: "muted" }, "This stack runs on its development keys: it signs a token for any tenant, for an hour."),
    field("Tenant", tenant),
    field("Scope", scope, "`/` (the tenant root), or a node such as workspace:eng/project:billing."),
    field("Clearance", clearance, "The highest confidentiality band the token reads."),
    h("button", { type: "submit" }, "Sign in for development"),
  );
  ctx.root.append(devForm);
}
