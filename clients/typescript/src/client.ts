// A client of the knowledge service's public gRPC API: one channel, the bearer token set on every
// call by an interceptor, each unary RPC as a promise, errors as KnowledgeError (the catalogue's
// reason and metadata), and helpers for the client stream (the upload) and the server streams
// (the document watch and the events).
import { once } from "node:events";

import * as grpc from "@grpc/grpc-js";

import { translated } from "./errors";
import type { CorpusServiceClient } from "./generated/knowledge/v1/CorpusService";
import type { DocumentChange__Output } from "./generated/knowledge/v1/DocumentChange";
import type { DocumentServiceClient } from "./generated/knowledge/v1/DocumentService";
import type { DocumentsAIServiceClient } from "./generated/knowledge/v1/DocumentsAIService";
import type { Event__Output } from "./generated/knowledge/v1/Event";
import type { EventServiceClient } from "./generated/knowledge/v1/EventService";
import type { ImportServiceClient } from "./generated/knowledge/v1/ImportService";
import type { IngestJobServiceClient } from "./generated/knowledge/v1/IngestJobService";
import type { PassageServiceClient } from "./generated/knowledge/v1/PassageService";
import type { QueryRequest } from "./generated/knowledge/v1/QueryRequest";
import type { QueryStreamResponse__Output } from "./generated/knowledge/v1/QueryStreamResponse";
import type { SearchServiceClient } from "./generated/knowledge/v1/SearchService";
import type { TenantServiceClient } from "./generated/knowledge/v1/TenantService";
import type { UploadDocumentRequest } from "./generated/knowledge/v1/UploadDocumentRequest";
import type { UploadDocumentResponse__Output } from "./generated/knowledge/v1/UploadDocumentResponse";
import type { WebhookServiceClient } from "./generated/knowledge/v1/WebhookService";
import { contract } from "./loader";

/** The bearer token, or a function asked for it on every call (to hand out a refreshed one). */
export type TokenSource = string | (() => string);

/** An interceptor that sets ``authorization: Bearer <token>`` on every call of a channel. */
export function tokenInterceptor(token: TokenSource): grpc.Interceptor {
  return (options, nextCall) =>
    new grpc.InterceptingCall(nextCall(options), {
      start(metadata, listener, next) {
        metadata.set("authorization", `Bearer ${typeof token === "function" ? token() : token}`);
        next(metadata, listener);
      },
    });
}

type UnaryName<C> = {
  [K in keyof C]: K extends string
    ? K extends Capitalize<K>
      ? C[K] extends (argument: any, callback: grpc.requestCallback<any>) => grpc.ClientUnaryCall
        ? K
        : never
      : never
    : never;
}[keyof C];

/** A generated service client's unary RPCs, by their proto names, as promises. */
export type PromiseClient<C> = {
  [K in UnaryName<C>]: C[K] extends (argument: infer Request, callback: grpc.requestCallback<infer Response>) => any
    ? (request: Request, options?: grpc.CallOptions) => Promise<Response>
    : never;
};

function promised<C extends grpc.Client>(client: C): PromiseClient<C> {
  const service = (client.constructor as grpc.ServiceClientConstructor).service;
  const methods: Record<string, unknown> = {};
  for (const [name, method] of Object.entries(service)) {
    if (method.requestStream || method.responseStream) {
      continue;
    }
    methods[name] = (request: unknown, options: grpc.CallOptions = {}) =>
      new Promise((resolve, reject) => {
        const call = (client as unknown as Record<string, Function>)[name];
        call.call(client, request, new grpc.Metadata(), options, (error: grpc.ServiceError | null, response: unknown) =>
          error ? reject(translated(error)) : resolve(response),
        );
      });
  }
  return methods as PromiseClient<C>;
}

export interface ClientOptions {
  /** host:port of the gateway (every public service) or of a service's own port. */
  address: string;
  token: TokenSource;
  /** Insecure by default: TLS belongs to whatever terminates it in front of the gateway. */
  credentials?: grpc.ChannelCredentials;
  channelOptions?: grpc.ChannelOptions;
}

export interface UploadOptions {
  corpusId: string;
  filename: string;
  /** The file's bytes: whole, or in pieces as they come (a file stream), never held whole here. */
  data: Uint8Array | Iterable<Uint8Array> | AsyncIterable<Uint8Array>;
  contentType?: string;
  /** Who may read the new document ("user:<sub>", "group:<name>"; [] for everyone who reaches the
   * corpus); absent, the corpus's default list applies. */
  principals?: string[];
  /** The largest piece sent in one message. */
  chunkBytes?: number;
  callOptions?: grpc.CallOptions;
}

export interface WatchOptions {
  /** Ends the watch (the stream is cancelled and the iteration ends without an error). */
  signal?: AbortSignal;
  callOptions?: grpc.CallOptions;
}

const DEFAULT_CHUNK_BYTES = 256 * 1024;

export class KnowledgeClient {
  readonly channel: grpc.Channel;
  /** The generated clients, for what the promise methods and helpers do not cover. */
  readonly raw: {
    corpora: CorpusServiceClient;
    documents: DocumentServiceClient;
    jobs: IngestJobServiceClient;
    imports: ImportServiceClient;
    tenants: TenantServiceClient;
    events: EventServiceClient;
    search: SearchServiceClient;
    documentsAI: DocumentsAIServiceClient;
    passages: PassageServiceClient;
    webhooks: WebhookServiceClient;
  };
  readonly corpora: PromiseClient<CorpusServiceClient>;
  readonly documents: PromiseClient<DocumentServiceClient>;
  readonly jobs: PromiseClient<IngestJobServiceClient>;
  readonly imports: PromiseClient<ImportServiceClient>;
  readonly tenants: PromiseClient<TenantServiceClient>;
  readonly search: PromiseClient<SearchServiceClient>;
  readonly documentsAI: PromiseClient<DocumentsAIServiceClient>;
  /** The platform index: passages under the caller's own reference (IndexPassages, ...). */
  readonly passages: PromiseClient<PassageServiceClient>;
  readonly webhooks: PromiseClient<WebhookServiceClient>;

  constructor(options: ClientOptions) {
    const credentials = options.credentials ?? grpc.credentials.createInsecure();
    this.channel = new grpc.Channel(options.address, credentials, options.channelOptions ?? {});
    const shared = { channelOverride: this.channel, interceptors: [tokenInterceptor(options.token)] };
    const v1 = contract().knowledge.v1;
    this.raw = {
      corpora: new v1.CorpusService(options.address, credentials, shared),
      documents: new v1.DocumentService(options.address, credentials, shared),
      jobs: new v1.IngestJobService(options.address, credentials, shared),
      imports: new v1.ImportService(options.address, credentials, shared),
      tenants: new v1.TenantService(options.address, credentials, shared),
      events: new v1.EventService(options.address, credentials, shared),
      search: new v1.SearchService(options.address, credentials, shared),
      documentsAI: new v1.DocumentsAIService(options.address, credentials, shared),
      passages: new v1.PassageService(options.address, credentials, shared),
      webhooks: new v1.WebhookService(options.address, credentials, shared),
    };
    this.corpora = promised(this.raw.corpora);
    this.documents = promised(this.raw.documents);
    this.jobs = promised(this.raw.jobs);
    this.imports = promised(this.raw.imports);
    this.tenants = promised(this.raw.tenants);
    this.search = promised(this.raw.search);
    this.documentsAI = promised(this.raw.documentsAI);
    this.passages = promised(this.raw.passages);
    this.webhooks = promised(this.raw.webhooks);
  }

  /** Streams a file into a corpus (UploadDocument); answered once its bytes are stored, with the
   * job that ingests it. The corpus, the file's name and the access list go on the first message,
   * as the RPC asks. */
  upload(options: UploadOptions): Promise<UploadDocumentResponse__Output> {
    const chunkBytes = options.chunkBytes ?? DEFAULT_CHUNK_BYTES;
    return new Promise((resolve, reject) => {
      let settled = false;
      let answered: () => void = () => {};
      const finished = new Promise<void>((done) => (answered = done));
      const call = this.raw.jobs.UploadDocument(new grpc.Metadata(), options.callOptions ?? {}, (error, response) => {
        settled = true;
        answered();
        if (error) {
          reject(translated(error));
        } else {
          resolve(response as UploadDocumentResponse__Output);
        }
      });
      const send = async () => {
        let first = true;
        const head: UploadDocumentRequest = { corpus_id: options.corpusId, filename: options.filename };
        if (options.principals !== undefined) {
          head.access = { principals: options.principals }; // [] is a list too: it overrides the default
        }
        const contentType = options.contentType ?? "application/octet-stream";
        for await (const piece of pieces(options.data, chunkBytes)) {
          if (settled) {
            return; // answered already (refused): nothing more to send
          }
          const message: UploadDocumentRequest = first
            ? { ...head, http_body: { content_type: contentType, data: piece } }
            : { http_body: { data: piece } };
          first = false;
          if (!call.write(message)) {
            await Promise.race([once(call, "drain"), finished]);
          }
        }
        if (first) {
          call.write({ ...head, http_body: { content_type: contentType, data: Buffer.alloc(0) } });
        }
        call.end();
      };
      send().catch((error: unknown) => {
        call.cancel();
        reject(error);
      });
    });
  }

  /** A corpus's documents as they are (SNAPSHOT), SYNCED, then each change as it is committed,
   * until the signal aborts, the consumer stops iterating, or the stream ends (e.g. the token's exp). */
  watchDocuments(corpusId: string, options: WatchOptions = {}): AsyncGenerator<DocumentChange__Output> {
    const call = this.raw.documents.WatchDocuments({ corpus_id: corpusId }, options.callOptions ?? {});
    return streamed(call, options.signal);
  }

  /** The tenant's events after ``after`` (a cursor; "" for the oldest kept), then live. */
  watchEvents(after = "", options: WatchOptions = {}): AsyncGenerator<Event__Output> {
    const call = this.raw.events.WatchEvents({ after }, options.callOptions ?? {});
    return streamed(call, options.signal);
  }

  /** Query's answer as it is written: ``started``, then ``delta``s of text, then ``done`` (the
   * whole answer with its citations and cost). Aborting the signal (or leaving the loop) cancels
   * the call, which ends the model's. */
  queryStream(query: QueryRequest, options: WatchOptions = {}): AsyncGenerator<QueryStreamResponse__Output> {
    const call = this.raw.search.QueryStream({ query }, options.callOptions ?? {});
    return streamed(call, options.signal);
  }

  close(): void {
    this.channel.close();
  }
}

async function* pieces(
  data: Uint8Array | Iterable<Uint8Array> | AsyncIterable<Uint8Array>,
  size: number,
): AsyncGenerator<Uint8Array> {
  const whole = data instanceof Uint8Array ? [data] : data;
  for await (const piece of whole as AsyncIterable<Uint8Array>) {
    for (let start = 0; start < piece.length; start += size) {
      yield piece.subarray(start, Math.min(start + size, piece.length));
    }
  }
}

async function* streamed<T>(call: grpc.ClientReadableStream<T>, signal?: AbortSignal): AsyncGenerator<T> {
  const abort = () => call.cancel();
  signal?.addEventListener("abort", abort, { once: true });
  try {
    for await (const item of call) {
      yield item as T;
    }
  } catch (error) {
    if (signal?.aborted) {
      return;
    }
    throw translated(error);
  } finally {
    signal?.removeEventListener("abort", abort);
    call.on("error", () => {}); // the CANCELLED status of a stream given up on is no error
    call.cancel();
  }
}
