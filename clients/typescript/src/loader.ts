// The contract as @grpc/proto-loader loads it, with the options that make it usable: without them
// proto-loader renames snake_case fields to camelCase (the JSON and every document use the proto
// names), turns int64 ids and counters into Long objects, enums into numbers, and leaves unset
// fields undefined. The generated types (scripts/build.mjs) are made with the same options.
import { join } from "node:path";

import * as grpc from "@grpc/grpc-js";
import * as protoLoader from "@grpc/proto-loader";

import type { ProtoGrpcType as DocumentsAI } from "./generated/documents_ai";
import type { ProtoGrpcType as Ingest } from "./generated/ingest";
import type { ProtoGrpcType as Search } from "./generated/search";

/** The protos shipped with the package: protos/knowledge/v1 and the vendored google/api, google/rpc. */
export const PROTO_DIR = join(__dirname, "..", "..", "proto");

export const LOADER_OPTIONS: protoLoader.Options = {
  keepCase: true, // corpus_id, not corpusId: the names of the protos, the REST JSON and the docs
  longs: String, // int64 ids and counts as strings, never Long objects or lossy numbers
  enums: String, // "DOCUMENT_STATE_SEARCHABLE", not 5
  defaults: true, // an unset field reads as its default ("", 0, []), as in every other language
  oneofs: true, // a oneof's set member is named by a virtual field (e.g. change.kind)
  includeDirs: [PROTO_DIR], // protos/ and third_party/, as the package ships them
};

export const PUBLIC_PROTOS = ["knowledge/v1/ingest.proto", "knowledge/v1/search.proto", "knowledge/v1/documents_ai.proto"];

export type Contract = Ingest & Search & DocumentsAI;

let loaded: Contract | undefined;

/** The public services' definitions, loaded once. */
export function contract(): Contract {
  if (loaded === undefined) {
    const definition = protoLoader.loadSync(PUBLIC_PROTOS, LOADER_OPTIONS);
    loaded = grpc.loadPackageDefinition(definition) as unknown as Contract;
  }
  return loaded;
}
