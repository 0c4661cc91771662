/**
 * `application/vnd.kubernetes.protobuf` for the built-in kinds: the JSON
 * form the server stores <-> proto2 bytes. The wire format is
 * @bufbuild/protobuf's (toBinary / fromBinary), driven by the vendored
 * descriptors (descriptors.ts); this file holds only what Kubernetes adds on
 * top (see PROVENANCE.md for the sources).
 *
 * A body is the magic `k8s\0` and one runtime.Unknown {typeMeta, raw,
 * contentEncoding, contentType} whose `raw` is the object's message. The
 * JSON <-> message mapping follows Go's JSON of the same types: Time and
 * MicroTime are RFC 3339 strings, Quantity a string, IntOrString a number
 * or a string, RawExtension and FieldsV1 embedded JSON, bytes base64,
 * string-list wrappers (ExtraValue, Verbs) plain arrays, and embedded Go
 * structs (INLINE) a field of their own on the wire but their fields in the
 * parent's JSON. Field names are the descriptors' json_name (Go's).
 *
 * Decoding what a Go client sends: Go writes every non-pointer field, so
 * zero values arrive for fields the user never set. Empty strings and zero
 * times are dropped (Go's JSON omits them too), and so are 0 / false of the
 * known non-pointer `omitempty` fields (OMIT_ZERO); other numbers and
 * booleans are kept, because for pointer fields (runAsUser: 0,
 * privileged: false) the zero is the user's choice and a policy must see it.
 *
 * plan.ts holds what both directions share, encode.ts JSON -> message,
 * decode.ts message -> JSON.
 */
export { messageFor, OMIT_ZERO, PROTOBUF_MEDIA_TYPE, ProtobufError } from './plan.ts';
export { encodeMessage, encodeObject } from './encode.ts';
export { decodeMessage, decodeObject, UnsupportedKind } from './decode.ts';
