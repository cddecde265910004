// The client against the real stack that tests/e2e/contracts/test_typescript_client.py starts
// (`knowledge up`): it hands over the gateway's address and tokens in the environment.
import assert from "node:assert/strict";
import { test } from "node:test";

import { KnowledgeClient, KnowledgeError, type Reason } from "../src/index";

const address = required("KNOWLEDGE_TEST_ADDRESS");
const token = required("KNOWLEDGE_TEST_TOKEN");
const maxUploadBytes = Number(required("KNOWLEDGE_TEST_MAX_UPLOAD_BYTES"));
const HANDBOOK =
  "# Staff handbook\n\n## Vacation\n\nEvery employee receives thirty days of paid vacation per year.\n\n" +
  "## Quokka program\n\nThe quokka mentoring program pairs new staff with a mentor for ninety days.\n";

function required(name: string): string {
  const value = process.env[name];
  assert.ok(value, `${name} is set by the pytest that runs these tests`);
  return value;
}

async function refused(call: Promise<unknown>, reason: Reason, code: string): Promise<KnowledgeError> {
  const error = await call.then(
    () => assert.fail(`expected ${reason}`),
    (caught: unknown) => caught,
  );
  assert.ok(error instanceof KnowledgeError, String(error));
  assert.equal(error.reason, reason);
  assert.equal(error.code, code);
  assert.ok(error.requestId, "every answer carries its request id");
  return error;
}

test("corpus, upload stream, watch, search, context and events", async (t) => {
  const kc = new KnowledgeClient({ address, token });
  t.after(() => kc.close());
  const corpus = await kc.corpora.CreateCorpus({ name: "TS Handbook", description: "from the TypeScript client" });
  assert.match(corpus.corpus_id, /^\d+$/); // ids are strings
  assert.equal(corpus.document_count, 0); // defaults: set even when zero

  const watching = new AbortController();
  const searchable = (async () => {
    for await (const change of kc.watchDocuments(corpus.corpus_id, { signal: watching.signal })) {
      if (change.kind === "DOCUMENT_CHANGE_KIND_CHANGED" && change.document?.state === "DOCUMENT_STATE_SEARCHABLE") {
        return change;
      }
    }
    return undefined;
  })();
  const pieces = [HANDBOOK.slice(0, 40), HANDBOOK.slice(40)].map((piece) => Buffer.from(piece));
  const job = await kc.upload({
    corpusId: corpus.corpus_id,
    filename: "handbook.md",
    contentType: "text/markdown",
    data: pieces,
    chunkBytes: 16, // many messages: the stream, not one message
    principals: ["user:dev", "group:hr"], // dev: the test token's sub
  });
  assert.equal(job.status, "ingesting");
  assert.equal(job.corpus_id, corpus.corpus_id);
  const timer = setTimeout(() => watching.abort(), 120_000);
  const change = await searchable;
  clearTimeout(timer);
  watching.abort();
  assert.ok(change?.document, "the watch saw the document become searchable");
  const documentId = change.document_id;
  assert.equal(change.document.filename, "handbook.md");
  assert.deepEqual(change.document.principals, ["group:hr", "user:dev"]);
  assert.equal(change.document.size_bytes, String(Buffer.byteLength(HANDBOOK))); // an int64: a string (longs: String)

  const found = await kc.jobs.GetIngestJob({ job_id: job.job_id });
  assert.equal(found.state, "DOCUMENT_STATE_SEARCHABLE");

  const { results } = await kc.search.Search({ query: "quokka mentoring", corpus_id: corpus.corpus_id, top_k: 3 });
  assert.ok(results.length > 0);
  assert.equal(results[0].document_id, documentId);
  assert.equal(results[0].filename, "handbook.md");
  assert.match(results[0].content, /quokka mentoring/);

  // The streamed answer: its head, the text as written, then the whole answer with its citations.
  const kinds: string[] = [];
  let answered: { answer: string; citations: unknown[] } | undefined;
  for await (const message of kc.queryStream({ query: "What is quokka mentoring?", corpus_id: corpus.corpus_id })) {
    kinds.push(String(message.event));
    if (message.done) {
      answered = message.done;
    }
  }
  assert.equal(kinds[0], "started");
  assert.equal(kinds.at(-1), "done");
  assert.ok(kinds.includes("delta"), "the answer arrives in pieces");
  assert.ok(answered && answered.citations.length > 0 && answered.answer.length > 0);

  // The platform index's service is on the client too: whether this corpus would take passages now.
  const check = await kc.passages.CheckIndexing({ corpus_id: corpus.corpus_id });
  assert.equal(typeof check.admitted, "boolean");

  const { context } = await kc.search.GetContext({ query: "How long does the quokka program last?" });
  assert.ok(context);
  assert.ok(context.evidence.some((evidence) => evidence.document_id === documentId));
  assert.ok(context.rendered.length > 0);

  const seen: string[] = [];
  for await (const event of kc.watchEvents("")) {
    if (event.corpus_id === corpus.corpus_id) {
      seen.push(event.type);
    }
    if (event.type === "document.searchable" && event.document_id === documentId) {
      break; // leaving the loop cancels the stream
    }
  }
  assert.deepEqual(seen.slice(0, 1), ["corpus.created"]);
  assert.equal(seen.at(-1), "document.searchable");

  await t.test("an error of each kind, decoded into the catalogue's reasons", async () => {
    const invalid = await refused(kc.search.Search({ query: "" }), "INVALID_REQUEST", "INVALID_ARGUMENT");
    assert.deepEqual(invalid.metadata, { field: "query" });
    const missing = await refused(
      kc.search.Search({ query: "x", document_id: "999999" }),
      "DOCUMENT_NOT_FOUND",
      "NOT_FOUND",
    );
    assert.deepEqual(missing.metadata, { document_id: "999999" });
    await refused(kc.documents.GetDocument({ document_id: "999999" }), "DOCUMENT_NOT_FOUND", "NOT_FOUND");
    const taken = await refused(kc.corpora.CreateCorpus({ name: "TS Handbook" }), "CORPUS_ALREADY_EXISTS", "ALREADY_EXISTS");
    assert.equal(taken.metadata.name, "TS Handbook");
    const past = await refused(
      kc.documents.GetDocumentText({ document_id: documentId, page: 99 }),
      "PAGE_OUT_OF_RANGE",
      "OUT_OF_RANGE",
    );
    assert.equal(past.metadata.page, "99");
    const tooLarge = await refused(
      kc.upload({ corpusId: corpus.corpus_id, filename: "big.bin", data: Buffer.alloc(maxUploadBytes + 1) }),
      "UPLOAD_TOO_LARGE",
      "RESOURCE_EXHAUSTED",
    );
    assert.deepEqual(tooLarge.metadata, { max_bytes: String(maxUploadBytes) });

    for (const [name, reason] of [
      ["KNOWLEDGE_TEST_TOKEN_EXPIRED", "TOKEN_EXPIRED"],
      ["KNOWLEDGE_TEST_TOKEN_INVALID", "TOKEN_INVALID"],
    ] as const) {
      const other = new KnowledgeClient({ address, token: required(name) });
      await refused(other.search.Search({ query: "x" }), reason, "UNAUTHENTICATED");
      other.close();
    }
    const readOnly = new KnowledgeClient({ address, token: required("KNOWLEDGE_TEST_TOKEN_NO_SEARCH") });
    const denied = await refused(readOnly.search.Search({ query: "x" }), "CAPABILITY_MISSING", "PERMISSION_DENIED");
    assert.deepEqual(denied.metadata, { capability: "search" });
    readOnly.close();
  });
});
