"""Dump, as JSON on stdout, the wire contract the official 5.x Python SDK was built with: every
message, enum and service of package ``apache.rocketmq.v2`` in its generated modules
(``rocketmq.grpc_protocol`` ``definition_pb2``, ``service_pb2``, ``admin_pb2``). Runs under
``.venv-v5/bin/python``; never imports finchmq. A test compares it with finchmq's own ``.proto``.

Read from each file's ``FileDescriptorProto`` (what protoc wrote), so labels, ``oneof`` membership
and ``proto3_optional`` are exactly as declared:

    {"files": [...],
     "messages": {"apache.rocketmq.v2.Message": {"file": "definition.proto", "map_entry": false,
                  "fields": [{"name", "number", "type": "TYPE_STRING", "label": "LABEL_OPTIONAL",
                              "type_name": ".apache.rocketmq.v2.Resource" | "", "oneof": "name" | null,
                              "proto3_optional": bool}, ...]}, ...},
     "enums": {"apache.rocketmq.v2.Code": {"file": ..., "values": {"OK": 20000, ...}}, ...},
     "services": {"apache.rocketmq.v2.MessagingService": {"file": ..., "methods": [{"name", "input_type",
                  "output_type", "client_streaming", "server_streaming"}, ...]}}}

A field of a synthetic oneof (``proto3 optional``) shows ``proto3_optional: true`` and that oneof's
name (``_field``), as protoc records it.
"""

from __future__ import annotations

import json
import sys

from google.protobuf import descriptor_pb2

PACKAGE = "apache.rocketmq.v2"


def enum_entry(enum: descriptor_pb2.EnumDescriptorProto, file: str) -> dict:
    return {"file": file, "values": {value.name: value.number for value in enum.value}}


def walk_message(
    message: descriptor_pb2.DescriptorProto, prefix: str, file: str, messages: dict, enums: dict
) -> None:
    name = f"{prefix}.{message.name}"
    fields = []
    for field in message.field:
        in_oneof = field.HasField("oneof_index")
        fields.append(
            {
                "name": field.name,
                "number": field.number,
                "type": descriptor_pb2.FieldDescriptorProto.Type.Name(field.type),
                "label": descriptor_pb2.FieldDescriptorProto.Label.Name(field.label),
                "type_name": field.type_name,
                "oneof": message.oneof_decl[field.oneof_index].name if in_oneof else None,
                "proto3_optional": field.proto3_optional,
            }
        )
    messages[name] = {"file": file, "map_entry": message.options.map_entry, "fields": fields}
    for nested in message.nested_type:
        walk_message(nested, name, file, messages, enums)
    for enum in message.enum_type:
        enums[f"{name}.{enum.name}"] = enum_entry(enum, file)


def dump(modules: tuple = ()) -> dict:
    """The contract of ``modules`` (default: the SDK's generated modules)."""
    files, messages, enums, services = [], {}, {}, {}
    if not modules:
        from rocketmq.grpc_protocol import admin_pb2, definition_pb2, service_pb2  # noqa: PLC0415 (only under the SDK venv)

        modules = (definition_pb2, service_pb2, admin_pb2)
    for module in modules:
        proto = descriptor_pb2.FileDescriptorProto()
        module.DESCRIPTOR.CopyToProto(proto)
        if proto.package != PACKAGE:
            continue
        files.append({"name": proto.name, "syntax": proto.syntax, "dependencies": list(proto.dependency)})
        for message in proto.message_type:
            walk_message(message, PACKAGE, proto.name, messages, enums)
        for enum in proto.enum_type:
            enums[f"{PACKAGE}.{enum.name}"] = enum_entry(enum, proto.name)
        for service in proto.service:
            services[f"{PACKAGE}.{service.name}"] = {
                "file": proto.name,
                "methods": [
                    {
                        "name": method.name,
                        "input_type": method.input_type,
                        "output_type": method.output_type,
                        "client_streaming": method.client_streaming,
                        "server_streaming": method.server_streaming,
                    }
                    for method in service.method
                ],
            }
    return {"files": files, "messages": messages, "enums": enums, "services": services}


def main() -> int:
    json.dump(dump(), sys.stdout, indent=1, sort_keys=True)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
