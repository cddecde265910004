// A failed call's error, decoded from the google.rpc.Status every service and the gateway send in
// the grpc-status-details-bin trailer: one google.rpc.ErrorInfo whose reason is a name of
// knowledge.v1.ErrorReason (docs/api.md, "Errors").
import { join } from "node:path";

import * as grpc from "@grpc/grpc-js";
import * as protobuf from "protobufjs";

import type { ErrorReason__Output } from "./generated/knowledge/v1/ErrorReason";
import { PROTO_DIR } from "./loader";

/** A reason of the catalogue: ErrorReason's names without their prefix ("CORPUS_NOT_FOUND"). */
export type Reason = ErrorReason__Output extends `ERROR_REASON_${infer Name}` ? Exclude<Name, "UNSPECIFIED"> : never;

export const ERROR_DOMAIN = "knowledge.v1";
const ERROR_INFO_TYPE = "type.googleapis.com/google.rpc.ErrorInfo";

let statusTypes: { status: protobuf.Type; errorInfo: protobuf.Type } | undefined;

function types(): { status: protobuf.Type; errorInfo: protobuf.Type } {
  if (statusTypes === undefined) {
    const root = new protobuf.Root();
    root.resolvePath = (_origin, target) => join(PROTO_DIR, target);
    root.loadSync(["google/rpc/status.proto", "google/rpc/error_details.proto"], { keepCase: true });
    statusTypes = { status: root.lookupType("google.rpc.Status"), errorInfo: root.lookupType("google.rpc.ErrorInfo") };
  }
  return statusTypes;
}

/** A call the service (or the gateway) refused or failed, with the catalogue's reason. */
export class KnowledgeError extends Error {
  /** The gRPC status code's name ("NOT_FOUND"). */
  readonly code: keyof typeof grpc.status;
  /** The ErrorInfo's reason; "UNKNOWN" when the status carried none (the channel's own failure). */
  readonly reason: Reason | "UNKNOWN";
  /** The ErrorInfo's metadata (docs/api.md lists each key): e.g. { field: "query" }. */
  readonly metadata: Readonly<Record<string, string>>;
  /** The call's x-request-id, as the services logged it, when it came back. */
  readonly requestId: string | undefined;
  readonly grpcStatus: grpc.status;

  constructor(error: grpc.ServiceError) {
    const info = errorInfo(error.metadata);
    super(error.details || error.message);
    this.name = "KnowledgeError";
    this.grpcStatus = error.code;
    this.code = grpc.status[error.code] as keyof typeof grpc.status;
    this.reason = (info?.reason as Reason | undefined) ?? "UNKNOWN";
    this.metadata = Object.freeze({ ...(info?.metadata ?? {}) });
    const requestId = error.metadata?.get("x-request-id")[0];
    this.requestId = requestId === undefined ? undefined : String(requestId);
  }
}

/** The ErrorInfo of our domain in a status's trailer, if there is one. */
export function errorInfo(
  trailers: grpc.Metadata | undefined,
): { reason: string; domain: string; metadata: Record<string, string> } | undefined {
  const raw = trailers?.get("grpc-status-details-bin")[0];
  if (raw === undefined || typeof raw === "string") {
    return undefined;
  }
  const { status, errorInfo: info } = types();
  const decoded = status.toObject(status.decode(raw), { defaults: true }) as { details: { type_url: string; value: Uint8Array }[] };
  for (const detail of decoded.details) {
    if (detail.type_url !== ERROR_INFO_TYPE) {
      continue;
    }
    const parsed = info.toObject(info.decode(detail.value), { defaults: true }) as {
      reason: string;
      domain: string;
      metadata: Record<string, string>;
    };
    if (parsed.domain === ERROR_DOMAIN) {
      return parsed;
    }
  }
  return undefined;
}

/** ``error`` as a KnowledgeError when it is a gRPC status; anything else as it is. */
export function translated(error: unknown): unknown {
  if (error instanceof KnowledgeError) {
    return error;
  }
  if (error !== null && typeof error === "object" && "code" in error && "metadata" in error) {
    return new KnowledgeError(error as grpc.ServiceError);
  }
  return error;
}
