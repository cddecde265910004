"""gRPC server reflection in both versions tools ask for: ``grpc.reflection.v1`` (grpcurl, Postman,
current gRPC libraries) and ``grpc.reflection.v1alpha`` (older tools).

grpcio-reflection serves v1alpha only. The two protocols are the same messages under another
package name, field for field, so the v1 service is the same servicer under the v1 name, with the
v1 file's descriptor (v1alpha's, renamed) in the pool so that a tool can describe it too.

Reflection is behind the same token as the API (``interceptors.ScopeInterceptor``): any valid
token, no capability, since the descriptors are the protos in the repository and the OpenAPI
description is served without one; a caller without a token learns nothing about the services.
"""

from __future__ import annotations

from collections.abc import Sequence

import grpc
from google.protobuf import descriptor_pb2, descriptor_pool
from grpc_reflection.v1alpha import reflection, reflection_pb2, reflection_pb2_grpc

V1ALPHA = reflection.SERVICE_NAME  # "grpc.reflection.v1alpha.ServerReflection"
V1 = "grpc.reflection.v1.ServerReflection"
REFLECTION_PREFIX = "/grpc.reflection."
_V1_FILE = "grpc/reflection/v1/reflection.proto"


def _register_v1_descriptor(pool: descriptor_pool.DescriptorPool) -> None:
    """v1alpha's file, renamed to v1, in ``pool`` (once)."""
    try:
        pool.FindFileByName(_V1_FILE)
        return
    except KeyError:
        pass
    file = descriptor_pb2.FileDescriptorProto()
    reflection_pb2.DESCRIPTOR.CopyToProto(file)
    old, new = f".{file.package}.", ".grpc.reflection.v1."
    file.name, file.package = _V1_FILE, "grpc.reflection.v1"
    file.options.Clear()
    for message in file.message_type:
        for member in message.field:
            if member.type_name.startswith(old):
                member.type_name = new + member.type_name.removeprefix(old)
    for service in file.service:
        for method in service.method:
            method.input_type = new + method.input_type.removeprefix(old)
            method.output_type = new + method.output_type.removeprefix(old)
    pool.AddSerializedFile(file.SerializeToString())


def enable(server: grpc.aio.Server, service_names: Sequence[str]) -> None:
    """Serve reflection of ``service_names`` (and of reflection itself), v1 and v1alpha."""
    _register_v1_descriptor(descriptor_pool.Default())
    servicer = reflection.aio.ReflectionServicer([*service_names, V1, V1ALPHA])
    reflection_pb2_grpc.add_ServerReflectionServicer_to_server(servicer, server)
    server.add_generic_rpc_handlers(
        (
            grpc.method_handlers_generic_handler(
                V1,
                {
                    "ServerReflectionInfo": grpc.stream_stream_rpc_method_handler(
                        servicer.ServerReflectionInfo,
                        request_deserializer=reflection_pb2.ServerReflectionRequest.FromString,
                        response_serializer=reflection_pb2.ServerReflectionResponse.SerializeToString,
                    )
                },
            ),
        )
    )
