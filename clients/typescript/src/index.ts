export { KnowledgeClient, tokenInterceptor } from "./client";
export type { ClientOptions, PromiseClient, TokenSource, UploadOptions, WatchOptions } from "./client";
export { ERROR_DOMAIN, KnowledgeError, errorInfo } from "./errors";
export type { Reason } from "./errors";
export { LOADER_OPTIONS, PROTO_DIR, contract } from "./loader";
export * from "./generated/index";
