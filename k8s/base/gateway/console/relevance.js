// The relevance banner: how well the sources matched, in words, for search and answers alike.

import { h } from "./dom.js";

const WORDS = {
  RELEVANCE_HIGH: ["high", "Strong matches in your documents."],
  RELEVANCE_MODERATE: ["moderate", "Some matches: check the sources."],
  RELEVANCE_LOW: ["low", "Weak matches: the answer may not be in your documents."],
  RELEVANCE_LEXICAL_MATCH: ["lexical", "Keyword matches only: the words appear, the meaning may not."],
};

export function banner(relevance, count) {
  const [kind, text] = WORDS[relevance] || ["none", "Nothing relevant was found in your reach."];
  return h("p", { class: `banner banner-${kind}`, role: "status", id: "relevance" }, text, count === undefined ? "" : ` (${count} shown)`);
}
