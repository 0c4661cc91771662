/**
 * /openapi/v2 in the form kubectl asks for it: gnostic's openapi_v2.Document
 * in protobuf. Field numbers are those of gnostic's OpenAPIv2.proto, as read
 * from the file descriptor embedded in the kubectl 1.35 binary (Document
 * 1 swagger, 2 info, 9 definitions; Schema 1 _ref, 2 format, 19 required,
 * 21 additional_properties, 22 type, 23 items, 25 properties, 31
 * vendor_extension). Vendor extensions are carried as YAML (JSON is YAML).
 */
import { isPlainObject, type Obj } from '../types.ts';

function varint(n: number): number[] {
  const out: number[] = [];
  while (n > 0x7f) {
    out.push((n & 0x7f) | 0x80);
    n = Math.floor(n / 128);
  }
  out.push(n);
  return out;
}

function bytesField(field: number, b: Buffer): Buffer {
  return Buffer.concat([Buffer.from([...varint((field << 3) | 2), ...varint(b.length)]), b]);
}

function str(field: number, s: string): Buffer {
  return bytesField(field, Buffer.from(s, 'utf8'));
}

function bool(field: number, v: boolean): Buffer {
  return Buffer.from([...varint(field << 3), v ? 1 : 0]);
}

function named(name: string, value: Buffer): Buffer {
  return Buffer.concat([str(1, name), bytesField(2, value)]);
}

function schema(s: Obj): Buffer {
  const parts: Buffer[] = [];
  if (typeof s['$ref'] === 'string') parts.push(str(1, s['$ref']));
  if (typeof s['format'] === 'string') parts.push(str(2, s['format']));
  if (typeof s['description'] === 'string') parts.push(str(4, s['description']));
  if (Array.isArray(s['required'])) for (const r of s['required']) if (typeof r === 'string') parts.push(str(19, r));
  const addl = s['additionalProperties'];
  if (isPlainObject(addl)) parts.push(bytesField(21, bytesField(1, schema(addl))));
  else if (typeof addl === 'boolean') parts.push(bytesField(21, bool(2, addl)));
  if (typeof s['type'] === 'string') parts.push(bytesField(22, str(1, s['type'])));
  if (isPlainObject(s['items'])) parts.push(bytesField(23, bytesField(1, schema(s['items']))));
  if (isPlainObject(s['properties'])) {
    const props = Object.entries(s['properties']).filter(([, v]) => isPlainObject(v)).map(([k, v]) => bytesField(1, named(k, schema(v as Obj))));
    parts.push(bytesField(25, Buffer.concat(props)));
  }
  for (const [k, v] of Object.entries(s)) {
    if (!k.startsWith('x-')) continue;
    parts.push(bytesField(31, named(k, str(2, JSON.stringify(v)))));
  }
  return Buffer.concat(parts);
}

/** The Document protobuf of a swagger 2.0 JSON document (info and definitions; kubectl reads nothing else). */
export function encodeOpenapiV2(doc: Obj): Buffer {
  const info = isPlainObject(doc['info']) ? doc['info'] : {};
  const parts = [str(1, String(doc['swagger'] ?? '2.0')), bytesField(2, Buffer.concat([str(1, String(info['title'] ?? '')), str(2, String(info['version'] ?? ''))]))];
  const defs = isPlainObject(doc['definitions']) ? doc['definitions'] : {};
  const named_ = Object.entries(defs).filter(([, v]) => isPlainObject(v)).map(([k, v]) => bytesField(1, named(k, schema(v as Obj))));
  parts.push(bytesField(9, Buffer.concat(named_)));
  return Buffer.concat(parts);
}
