"""The ``.proto`` text the AWS Java serde registers for a message class: derived from the
class's file descriptor, so a Python and a Java producer of one ``.proto`` register the same
definition (one schema version, not two).

The Java serializer (``ProtobufSerializer.getSchemaDefinition``, serde 1.1.24, its cache
loader) does::

    final ProtoFileElement schemaElement =
        FileDescriptorUtils.fileDescriptorToProtoFile(fileDescriptorProto);
    String rawSchema = schemaElement.toSchema();
    return rawSchema.replace(
        "// Proto schema formatted by Wire, do not edit.\\n// Source: \\n\\n", "");

``FileDescriptorUtils`` (Apicurio's, copied into the serde) turns the ``FileDescriptorProto``
into Square Wire's parser elements, keeping only some options; Wire 5.2.0's ``toSchema``
prints them. This module does both, element for element, on Python's descriptor of the same
file; the committed vectors (``tests/compat/gsr/generated``) are the Java serde's own output.
"""

from __future__ import annotations

from typing import Any

from google.protobuf import descriptor_pb2, message

__all__ = ["class_definition", "java_definition"]

_Field = descriptor_pb2.FieldDescriptorProto
#: Wire's ``MAX_TAG_VALUE``: an extension range reaching it prints as ``max``
_MAX_TAG = (1 << 29) - 1
#: the file options ``fileDescriptorToProtoFile`` keeps, in its order (string, bool or enum)
_FILE_OPTIONS = (
    "java_package",
    "java_outer_classname",
    "java_multiple_files",
    "java_generic_services",
    "java_string_check_utf8",
    "cc_generic_services",
    "cc_enable_arenas",
    "csharp_namespace",
    "go_package",
    "objc_class_prefix",
    "php_class_prefix",
    "php_generic_services",
    "php_metadata_namespace",
    "php_namespace",
    "py_generic_services",
    "ruby_package",
    "swift_prefix",
    "optimize_for",
)


class _Option:
    """Wire's ``OptionElement`` (the kinds these files use: string, boolean, enum, number)."""

    __slots__ = ("name", "quoted", "value")

    def __init__(self, name: str, value: object, *, quoted: bool = False) -> None:
        self.name = name
        self.value = value
        self.quoted = quoted

    def text(self) -> str:
        value = self.value
        if isinstance(value, bool):  # Kotlin's Boolean.toString
            value = "true" if value else "false"
        return f'{self.name} = "{value}"' if self.quoted else f"{self.name} = {value}"

    def declaration(self) -> str:
        return f"option {self.text()};\n"


def _indented(value: str) -> str:
    """Wire's ``appendIndented``: every line two spaces in (blank ones too), a last empty
    line dropped."""
    lines = value.split("\n")
    if len(lines) > 1 and lines[-1] == "":
        lines.pop()
    return "".join(f"  {line}\n" for line in lines)


def _options_list(options: list[_Option]) -> str:
    """Wire's ``appendOptions``: ``[a = 1]``, or one option a line."""
    if len(options) == 1:
        return f"[{options[0].text()}]"
    body = "".join(
        _indented(o.text() + ("," if i < len(options) - 1 else "")) for i, o in enumerate(options)
    )
    return f"[\n{body}]"


def _enum_option(options: Any, name: str) -> str:
    field = options.DESCRIPTOR.fields_by_name[name]
    return str(field.enum_type.values_by_number[getattr(options, name)].name)


def _file_options(options: Any) -> list[_Option]:
    found = []
    fields = options.DESCRIPTOR.fields_by_name
    for name in _FILE_OPTIONS:
        if name not in fields or not options.HasField(name):  # php_generic_services: gone
            continue
        field = fields[name]
        if field.type == field.TYPE_ENUM:
            found.append(_Option(name, _enum_option(options, name)))
        else:
            quoted = field.type == field.TYPE_STRING
            found.append(_Option(name, getattr(options, name), quoted=quoted))
    return found


def _default_json_name(name: str) -> str:
    """``FileDescriptorUtils.getDefaultJsonName``: ``a_bc`` is ``aBc``."""
    parts = name.split("_")
    while len(parts) > 1 and parts[-1] == "":  # Java's split drops trailing empty strings
        parts.pop()
    return parts[0] + "".join(p[:1].upper() + p[1:] for p in parts[1:])


def _label(file: descriptor_pb2.FileDescriptorProto, field: _Field) -> str | None:
    proto3 = file.syntax == "proto3"
    if field.label == _Field.LABEL_REQUIRED:
        return None if proto3 else "required"
    if field.label == _Field.LABEL_REPEATED:
        return "repeated"
    return None if proto3 and not field.HasField("proto3_optional") else "optional"


def _type_name(field: _Field) -> str:
    if field.HasField("type_name"):
        return field.type_name
    return _Field.Type.Name(field.type).removeprefix("TYPE_").lower()


def _field(file: descriptor_pb2.FileDescriptorProto, field: _Field, *, in_oneof: bool) -> str:
    """``toField`` then Wire's ``FieldElement.toSchema``."""
    options: list[_Option] = []
    fo = field.options
    if fo.HasField("packed"):
        options.append(_Option("packed", fo.packed))
    if field.HasField("json_name") and field.json_name != _default_json_name(field.name):
        options.append(_Option("json_name", field.json_name, quoted=True))
    if fo.HasField("deprecated"):
        options.append(_Option("deprecated", fo.deprecated))
    if fo.HasField("ctype"):
        options.append(_Option("ctype", _enum_option(fo, "ctype")))
    if fo.HasField("jstype"):
        options.append(_Option("jstype", _enum_option(fo, "jstype")))
    type_name = _type_name(field)
    if field.HasField("default_value"):
        simple = type_name.rsplit(".", 1)[-1]
        options.append(_Option("default", field.default_value, quoted=simple == "string"))
    label = None if in_oneof else _label(file, field)
    text = f"{label} " if label else ""
    text += f"{type_name} {field.name} = {field.number}"
    if options:
        text += " " + _options_list(options)
    return text + ";\n"


def _enum(enum: descriptor_pb2.EnumDescriptorProto) -> str:
    """``toEnum`` (values without their options, reserved names only) then Wire's
    ``EnumElement.toSchema``."""
    out = f"enum {enum.name} {{"
    reserved = [f'reserved "{name}";\n' for name in enum.reserved_name]
    options = [_Option("allow_alias", enum.options.allow_alias)]
    if not enum.options.HasField("allow_alias"):
        options = []
    if reserved:
        out += "\n" + "".join(_indented(r) for r in reserved)
    elif options or enum.value:
        out += "\n"
    out += "".join(_indented(o.declaration()) for o in options)
    out += "".join(_indented(f"{v.name} = {v.number};\n") for v in enum.value)
    return out + "}\n"


def _message(file: descriptor_pb2.FileDescriptorProto, msg: descriptor_pb2.DescriptorProto) -> str:
    """``toMessage`` then Wire's ``MessageElement.toSchema``."""
    reserved = [f'reserved "{name}";\n' for name in msg.reserved_name]
    reserved += [f"reserved {r.start} to {_range_end(r.end)};\n" for r in msg.reserved_range]
    options = []
    if msg.options.HasField("map_entry"):
        options.append(_Option("map_entry", msg.options.map_entry))
    if msg.options.HasField("no_standard_descriptor_accessor"):
        options.append(
            _Option("no_standard_descriptor_accessor", msg.options.no_standard_descriptor_accessor)
        )
    # the plain fields, proto3 optionals after them, then each oneof with its fields
    optional = [f for f in msg.field if f.HasField("proto3_optional")]
    plain = [f for f in msg.field if not f.HasField("oneof_index")]
    blocks = [_field(file, f, in_oneof=False) for f in plain + optional]
    for index, oneof in enumerate(msg.oneof_decl):
        members = [
            f
            for f in msg.field
            if f.HasField("oneof_index")
            and f.oneof_index == index
            and not f.HasField("proto3_optional")
        ]
        if members:
            inner = "".join(_indented(_field(file, f, in_oneof=True)) for f in members)
            blocks.append(f"oneof {oneof.name} {{\n{inner}}}\n")
    extensions = [f"extensions {r.start} to {_range_end(r.end)};\n" for r in msg.extension_range]
    nested = [_message(file, m) for m in msg.nested_type] + [_enum(e) for e in msg.enum_type]

    out = f"message {msg.name} {{"
    if reserved:
        out += "\n" + "".join(_indented(r) for r in reserved)
    if options:
        out += "\n" + "".join(_indented(o.declaration()) for o in options)
    for block in blocks:
        out += "\n" + _indented(block)
    if extensions:
        out += "\n" + "".join(_indented(e) for e in extensions)
    for block in nested:
        out += "\n" + _indented(block)
    return out + "}\n"


def _range_end(end: int) -> str:
    """A descriptor range's exclusive end as Wire prints the inclusive last tag."""
    last = end - 1
    return str(last) if last < _MAX_TAG else "max"


def _service(service: descriptor_pb2.ServiceDescriptorProto) -> str:
    """``toService`` then Wire's ``ServiceElement.toSchema``."""
    out = f"service {service.name} {{"
    if service.options.HasField("deprecated"):
        out += "\n" + _indented(_Option("deprecated", service.options.deprecated).declaration())
    rpcs = []
    for method in service.method:
        text = f"rpc {method.name} ("
        text += "stream " if method.client_streaming else ""
        text += f"{method.input_type}) returns ("
        text += "stream " if method.server_streaming else ""
        text += f"{method.output_type})"
        mo = method.options
        options = []
        if mo.HasField("deprecated"):
            options.append(_Option("deprecated", mo.deprecated))
        if mo.HasField("idempotency_level"):
            options.append(_Option("idempotency_level", _enum_option(mo, "idempotency_level")))
        if options:
            text += " {\n" + "".join(_indented(o.declaration()) for o in options) + "}"
        rpcs.append(text + ";\n")
    if rpcs:
        out += "\n" + "".join(_indented(r) for r in rpcs)
    return out + "}\n"


def java_definition(file: descriptor_pb2.FileDescriptorProto) -> str:
    """The definition the Java serde registers for a message of ``file``."""
    out = ""
    if file.syntax in ("proto2", "proto3"):
        out += f'\nsyntax = "{file.syntax}";\n'
    if file.package:
        out += f"\npackage {file.package};\n"
    public = set(file.public_dependency)
    imports = [d for i, d in enumerate(file.dependency) if i not in public]
    public_imports = [d for i, d in enumerate(file.dependency) if i in public]
    if imports or public_imports:
        out += "\n" + "".join(f'import "{d}";\n' for d in imports)
        out += "".join(f'import public "{d}";\n' for d in public_imports)
    options = _file_options(file.options)
    if options:
        out += "\n" + "".join(o.declaration() for o in options)
    for msg in file.message_type:
        out += "\n" + _message(file, msg)
    for enum in file.enum_type:
        out += "\n" + _enum(enum)
    for service in file.service:
        out += "\n" + _service(service)
    # Wire's header ("// Proto schema formatted by Wire, do not edit.\n// Source: \n") and the
    # blank line after it are what the Java serializer removes: the text starts one line on
    return out[1:] if out.startswith("\n") else out


def class_definition(message_type: type[message.Message]) -> str:
    """The definition the Java serde registers for ``message_type``'s file."""
    file: Any = message_type.DESCRIPTOR.file
    return java_definition(descriptor_pb2.FileDescriptorProto.FromString(file.serialized_pb))
