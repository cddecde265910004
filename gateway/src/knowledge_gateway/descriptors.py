"""The FileDescriptorSet that Envoy's grpc_json_transcoder reads.

Built from the generated ``knowledge.v1`` modules and everything they import, so it always
matches the stubs the services run (which a test checks against the protos). Which services are
public is the registry's word (``knowledge_runtime.registry``): their full names are looked up in
the generated modules' descriptor pool, so a gRPC service added to a public entry is transcoded,
routed and described without a change here.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from google.api import annotations_pb2
from google.protobuf import descriptor_pb2
from google.protobuf.descriptor import FileDescriptor, MethodDescriptor, ServiceDescriptor
from google.rpc import error_details_pb2, status_pb2
from knowledge_runtime.registry import grpc_descriptor, public_services


def public_service_descriptors() -> list[ServiceDescriptor]:
    """The gRPC services the gateway exposes, in registry order; the rest stay internal."""
    return [grpc_descriptor(name) for entry in public_services() for name in entry.grpc_services]


def descriptor_set() -> descriptor_pb2.FileDescriptorSet:
    """Every file the public services need, dependencies before dependants."""
    ordered: list[FileDescriptor] = []
    seen: set[str] = set()

    def visit(file: FileDescriptor) -> None:
        if file.name in seen:
            return
        seen.add(file.name)
        for dependency in file.dependencies:
            visit(dependency)
        ordered.append(file)

    for service in public_service_descriptors():
        visit(service.file)
    # convert_grpc_status prints google.rpc.Status with its ErrorInfo as JSON: it needs both.
    visit(status_pb2.DESCRIPTOR)
    visit(error_details_pb2.DESCRIPTOR)
    result = descriptor_pb2.FileDescriptorSet()
    for file in ordered:
        result.file.add().ParseFromString(file.serialized_pb)
    return result


def descriptor_bytes() -> bytes:
    """The descriptor set as the file the transcoder reads."""
    return descriptor_set().SerializeToString()


def write_descriptor_set(path: Path) -> Path:
    """The descriptor set as the file Envoy's transcoder is configured to read."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(descriptor_bytes())
    return path


def public_service_names() -> list[str]:
    return [name for entry in public_services() for name in entry.grpc_services]


def public_method(name: str) -> MethodDescriptor:
    """The public RPC called ``name``, whichever public service has it (RPC names are unique)."""
    found = [method for service in public_service_descriptors() for method in service.methods if method.name == name]
    if len(found) != 1:
        raise LookupError(f"{len(found)} public RPCs are called {name}, not one")
    return found[0]


def streamed_methods() -> Iterator[MethodDescriptor]:
    """The public RPCs that answer with a server stream (their REST answer streams too)."""
    for service in public_service_descriptors():
        for method in service.methods:
            if method.server_streaming:
                yield method


def http_rules() -> Iterator[tuple[MethodDescriptor, str, str]]:
    """(method, verb, path template) of every public RPC with a ``google.api.http`` rule."""
    for service in public_service_descriptors():
        for method in service.methods:
            options = method.GetOptions()
            if options.HasExtension(annotations_pb2.http):
                rule = options.Extensions[annotations_pb2.http]
                verb = rule.WhichOneof("pattern")
                yield method, verb, getattr(rule, verb)
