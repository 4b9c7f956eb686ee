import com.amazonaws.services.schemaregistry.common.GlueSchemaRegistryDataFormatDeserializer;
import com.amazonaws.services.schemaregistry.common.GlueSchemaRegistryDataFormatSerializer;
import com.amazonaws.services.schemaregistry.common.Schema;
import com.amazonaws.services.schemaregistry.common.configs.GlueSchemaRegistryConfiguration;
import com.amazonaws.services.schemaregistry.deserializers.GlueSchemaRegistryDeserializerDataParser;
import com.amazonaws.services.schemaregistry.deserializers.GlueSchemaRegistryDeserializerFactory;
import com.amazonaws.services.schemaregistry.deserializers.protobuf.ProtobufSchemaParser;
import com.amazonaws.services.schemaregistry.serializers.GlueSchemaRegistrySerializerFactory;
import com.amazonaws.services.schemaregistry.serializers.SerializationDataEncoder;
import com.amazonaws.services.schemaregistry.serializers.json.JsonDataWithSchema;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import com.google.protobuf.DescriptorProtos;
import com.google.protobuf.Descriptors;
import com.google.protobuf.DynamicMessage;
import com.google.protobuf.Message;
import java.io.ByteArrayOutputStream;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HexFormat;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import org.apache.avro.generic.GenericDatumReader;
import org.apache.avro.generic.GenericDatumWriter;
import org.apache.avro.io.DecoderFactory;
import org.apache.avro.io.JsonEncoder;
import org.apache.avro.io.EncoderFactory;
import software.amazon.awssdk.services.glue.model.DataFormat;

/**
 * The Java side of kinesis-trio's GSR compatibility vectors, through the AWS serde's own
 * classes, as its facades use them (GlueSchemaRegistrySerializationFacade.serialize: the
 * format's serializer, then SerializationDataEncoder.write; the deserialization facade: the
 * schema by version id, then the format's deserializer). A map stands in for the registry.
 *
 *   write CASES OUT: each case written uncompressed and with zlib, as JSON lines.
 *   read IN OUT:     each record of IN decoded; the object written out as JSON lines.
 *   definitions SET OUT FILE...: for each top-level message of each FILE of the descriptor set
 *                    SET (protoc's --descriptor_set_out with --include_imports), the schema
 *                    definition the serializer registers for it, as JSON lines. A message of a
 *                    generated class holds the same FileDescriptor (built from the descriptor
 *                    protoc embeds in it): getSchemaDefinition reads only that.
 */
public final class GsrVectors {
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final HexFormat HEX = HexFormat.of();

    private static GlueSchemaRegistryConfiguration config(String compression) {
        Map<String, Object> c = new HashMap<>();
        c.put("region", "us-east-1");
        c.put("compression", compression);
        c.put("avroRecordType", "GENERIC_RECORD");
        c.put("protobufMessageType", "DYNAMIC_MESSAGE");
        return new GlueSchemaRegistryConfiguration(c);
    }

    public static void main(String[] args) throws Exception {
        if (args.length == 3 && args[0].equals("write")) {
            write(Path.of(args[1]), Path.of(args[2]));
        } else if (args.length == 3 && args[0].equals("read")) {
            read(Path.of(args[1]), Path.of(args[2]));
        } else if (args.length >= 4 && args[0].equals("definitions")) {
            definitions(Path.of(args[1]), Path.of(args[2]), List.of(args).subList(3, args.length));
        } else {
            System.err.println("usage: GsrVectors write CASES OUT | read IN OUT | definitions SET OUT FILE...");
            System.exit(2);
        }
    }

    private static void write(Path cases, Path out) throws Exception {
        List<String> lines = new ArrayList<>();
        int n = 0;
        for (JsonNode c : JSON.readTree(cases.toFile())) {
            String format = c.get("format").asText();
            String definition = c.get("definition").asText();
            String name = c.get("schema_name").asText();
            JsonNode value = c.get("value");
            for (String compression : new String[] {"NONE", "ZLIB"}) {
                n += 1;
                UUID id = UUID.nameUUIDFromBytes(("java-" + n).getBytes(StandardCharsets.UTF_8));
                Object object;
                String registered = definition;
                if (format.equals("AVRO")) {
                    org.apache.avro.Schema schema = new org.apache.avro.Schema.Parser().parse(definition);
                    object = new GenericDatumReader<Object>(schema)
                        .read(null, DecoderFactory.get().jsonDecoder(schema, value.toString()));
                } else if (format.equals("JSON")) {
                    object = JsonDataWithSchema.builder(definition, value.toString()).build();
                } else {
                    Descriptors.FileDescriptor file = ProtobufSchemaParser.parse(definition, name + ".proto");
                    object = message(c.get("message").asText(), file, value);
                }
                GlueSchemaRegistryDataFormatSerializer serializer = new GlueSchemaRegistrySerializerFactory()
                    .getInstance(DataFormat.fromValue(format), config(compression));
                if (format.equals("PROTOBUF")) {
                    registered = serializer.getSchemaDefinition(object);
                }
                byte[] record = new SerializationDataEncoder(config(compression))
                    .write(serializer.serialize(object), id);
                ObjectNode line = JSON.createObjectNode();
                line.put("format", format);
                line.put("compression", compression);
                line.put("schema_name", name);
                line.put("version_id", id.toString());
                line.put("definition", registered);
                if (c.has("message")) {
                    line.put("message", c.get("message").asText());
                }
                line.set("value", value);
                line.put("record_hex", HEX.formatHex(record));
                lines.add(JSON.writeValueAsString(line));
            }
        }
        Files.write(out, lines, StandardCharsets.UTF_8);
    }

    private static void read(Path in, Path out) throws Exception {
        List<String> lines = new ArrayList<>();
        for (String text : Files.readAllLines(in, StandardCharsets.UTF_8)) {
            if (text.isBlank()) {
                continue;
            }
            JsonNode v = JSON.readTree(text);
            String format = v.get("format").asText();
            String definition = v.get("definition").asText();
            ByteBuffer buffer = ByteBuffer.wrap(HEX.parseHex(v.get("record_hex").asText()));
            UUID id = GlueSchemaRegistryDeserializerDataParser.getInstance().getSchemaVersionId(buffer);
            Schema schema = new Schema(definition, format, v.get("schema_name").asText());
            GlueSchemaRegistryDataFormatDeserializer deserializer = new GlueSchemaRegistryDeserializerFactory()
                .getInstance(DataFormat.fromValue(format), config("NONE"));
            Object object = deserializer.deserialize(buffer, schema);
            ObjectNode line = JSON.createObjectNode();
            line.put("format", format);
            line.put("version_id", id.toString());
            if (format.equals("AVRO")) {
                org.apache.avro.Schema avro = new org.apache.avro.Schema.Parser().parse(definition);
                ByteArrayOutputStream json = new ByteArrayOutputStream();
                JsonEncoder encoder = EncoderFactory.get().jsonEncoder(avro, json);
                new GenericDatumWriter<Object>(avro).write(object, encoder);
                encoder.flush();
                line.set("value", JSON.readTree(json.toByteArray()));
            } else if (format.equals("JSON")) {
                line.set("value", JSON.readTree(((JsonDataWithSchema) object).getPayload()));
            } else {
                Message message = (Message) object;
                line.put("message", message.getDescriptorForType().getFullName());
                line.put("message_hex", HEX.formatHex(message.toByteArray()));
            }
            lines.add(JSON.writeValueAsString(line));
        }
        Files.write(out, lines, StandardCharsets.UTF_8);
    }

    private static void definitions(Path set, Path out, List<String> files) throws Exception {
        Map<String, Descriptors.FileDescriptor> built = new HashMap<>();
        DescriptorProtos.FileDescriptorSet protos =
            DescriptorProtos.FileDescriptorSet.parseFrom(Files.readAllBytes(set));
        for (DescriptorProtos.FileDescriptorProto proto : protos.getFileList()) {  // imports first
            List<Descriptors.FileDescriptor> deps = new ArrayList<>();
            for (String dep : proto.getDependencyList()) {
                deps.add(built.get(dep));
            }
            built.put(proto.getName(), Descriptors.FileDescriptor.buildFrom(
                proto, deps.toArray(new Descriptors.FileDescriptor[0])));
        }
        GlueSchemaRegistryDataFormatSerializer serializer = new GlueSchemaRegistrySerializerFactory()
            .getInstance(DataFormat.PROTOBUF, config("NONE"));
        List<String> lines = new ArrayList<>();
        for (String name : files) {
            for (Descriptors.Descriptor type : built.get(name).getMessageTypes()) {
                ObjectNode line = JSON.createObjectNode();
                line.put("file", name);
                line.put("message", type.getFullName());
                line.put("definition", serializer.getSchemaDefinition(DynamicMessage.getDefaultInstance(type)));
                lines.add(JSON.writeValueAsString(line));
            }
        }
        Files.write(out, lines, StandardCharsets.UTF_8);
    }

    /** A DynamicMessage of the named type, its fields from a JSON object (by field name). */
    private static DynamicMessage message(String fullName, Descriptors.FileDescriptor file, JsonNode value) {
        Descriptors.Descriptor type = null;
        for (Descriptors.Descriptor top : file.getMessageTypes()) {
            type = find(top, fullName);
            if (type != null) {
                break;
            }
        }
        if (type == null) {
            throw new IllegalArgumentException("no message " + fullName);
        }
        return build(type, value);
    }

    private static Descriptors.Descriptor find(Descriptors.Descriptor d, String fullName) {
        if (d.getFullName().equals(fullName)) {
            return d;
        }
        for (Descriptors.Descriptor nested : d.getNestedTypes()) {
            Descriptors.Descriptor found = find(nested, fullName);
            if (found != null) {
                return found;
            }
        }
        return null;
    }

    private static DynamicMessage build(Descriptors.Descriptor type, JsonNode value) {
        DynamicMessage.Builder builder = DynamicMessage.newBuilder(type);
        Iterator<Map.Entry<String, JsonNode>> fields = value.fields();
        while (fields.hasNext()) {
            Map.Entry<String, JsonNode> entry = fields.next();
            Descriptors.FieldDescriptor field = type.findFieldByName(entry.getKey());
            if (field.isMapField()) {
                Descriptors.Descriptor entryType = field.getMessageType();
                Iterator<Map.Entry<String, JsonNode>> pairs = entry.getValue().fields();
                while (pairs.hasNext()) {
                    Map.Entry<String, JsonNode> pair = pairs.next();
                    ObjectNode kv = JSON.createObjectNode();
                    kv.put("key", pair.getKey());
                    kv.set("value", pair.getValue());
                    builder.addRepeatedField(field, build(entryType, kv));
                }
            } else if (field.isRepeated()) {
                for (JsonNode item : entry.getValue()) {
                    builder.addRepeatedField(field, scalar(field, item));
                }
            } else {
                builder.setField(field, scalar(field, entry.getValue()));
            }
        }
        return builder.build();
    }

    private static Object scalar(Descriptors.FieldDescriptor field, JsonNode node) {
        switch (field.getJavaType()) {
            case INT: return node.asInt();
            case LONG: return node.asLong();
            case DOUBLE: return node.asDouble();
            case FLOAT: return (float) node.asDouble();
            case BOOLEAN: return node.asBoolean();
            case STRING: return node.asText();
            case MESSAGE: return build(field.getMessageType(), node);
            case ENUM: return field.getEnumType().findValueByName(node.asText());
            default: throw new IllegalArgumentException("unsupported field " + field.getFullName());
        }
    }
}
