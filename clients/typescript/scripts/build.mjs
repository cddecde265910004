// Build the package from the repository's contract, offline: copy the protos beside the code
// (the package loads them at run time), generate the message and client types from them with
// proto-loader-gen-types (the same loader options the client loads them with), then compile.
import { execFileSync } from "node:child_process";
import { cpSync, mkdirSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(dirname(fileURLToPath(import.meta.url)));
const root = join(here, "..", "..");
const proto = join(here, "proto");
const generated = join(here, "src", "generated");
const bin = join(here, "node_modules", ".bin");

rmSync(proto, { recursive: true, force: true });
rmSync(generated, { recursive: true, force: true });
rmSync(join(here, "dist"), { recursive: true, force: true });
mkdirSync(join(proto, "knowledge"), { recursive: true });
cpSync(join(root, "protos", "knowledge"), join(proto, "knowledge"), { recursive: true });
cpSync(join(root, "third_party", "google"), join(proto, "google"), { recursive: true });

const files = readdirSync(join(proto, "knowledge", "v1"))
  .filter((name) => name.endsWith(".proto"))
  .map((name) => `knowledge/v1/${name}`);
// Keep in step with LOADER_OPTIONS in src/loader.ts: the types describe what the loader gives.
execFileSync(
  join(bin, "proto-loader-gen-types"),
  [
    "--keepCase",
    "--longs=String",
    "--enums=String",
    "--defaults",
    "--oneofs",
    "--grpcLib=@grpc/grpc-js",
    `--includeDirs=${proto}`,
    `--outDir=${generated}`,
    ...files,
    "google/rpc/status.proto",
    "google/rpc/error_details.proto",
  ],
  { stdio: "inherit" },
);
// Every knowledge.v1 message, enum and service type, from one module (names are unique in a package).
const modules = readdirSync(join(generated, "knowledge", "v1"))
  .filter((name) => name.endsWith(".ts"))
  .map((name) => `export * from "./knowledge/v1/${name.slice(0, -3)}";\n`);
writeFileSync(join(generated, "index.ts"), modules.join(""));
execFileSync(join(bin, "tsc"), ["-p", here], { stdio: "inherit" });
