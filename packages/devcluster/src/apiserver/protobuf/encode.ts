/** JSON -> message: the protobuf body of an object the server returns (see codec.ts for the mapping). */
import { ScalarType, toBinary, type DescMessage } from '@bufbuild/protobuf';
import { isObject } from '../../is-object.ts';
import { descOf, MAGIC, messageFor, planOf, ProtobufError, Special, TYPE_META, UNKNOWN, zeroJson, type FieldPlan, type Json, type Message } from './plan.ts';

function fail(path: string, what: string): never {
  throw new ProtobufError(`${path}: ${what}`);
}

function toScalar(type: ScalarType, v: Json, path: string): unknown {
  switch (type) {
    case ScalarType.STRING:
      if (typeof v !== 'string') fail(path, `expected a string, got ${JSON.stringify(v)}`);
      return v;
    case ScalarType.INT32:
      if (typeof v !== 'number' || !Number.isInteger(v) || v !== (v | 0)) fail(path, `expected a 32-bit integer, got ${JSON.stringify(v)}`);
      return v;
    case ScalarType.INT64:
      if (typeof v !== 'number' || !Number.isSafeInteger(v)) fail(path, `expected an integer, got ${JSON.stringify(v)}`);
      return v;
    case ScalarType.BOOL:
      if (typeof v !== 'boolean') fail(path, `expected a boolean, got ${JSON.stringify(v)}`);
      return v;
    case ScalarType.BYTES:
      if (typeof v !== 'string') fail(path, `expected base64 bytes, got ${JSON.stringify(v)}`);
      return Buffer.from(v, 'base64');
    default:
      fail(path, `unsupported scalar type ${ScalarType[type]}`);
  }
}

const textEncoder = new TextEncoder();

function timeMs(v: Json, path: string): number {
  if (typeof v !== 'string') fail(path, `a time must be an RFC 3339 string, not ${JSON.stringify(v)}`);
  const ms = Date.parse(v);
  if (Number.isNaN(ms)) fail(path, `invalid time ${JSON.stringify(v)}`);
  return ms;
}

/** The message of type `desc` for the JSON value `v`. */
function toMessage(desc: DescMessage, v: Json, path: string): Message {
  const plan = planOf(desc);
  const m = Object.create(plan.proto) as Message;
  switch (plan.special) {
    case Special.Time:
      m['seconds'] = Math.floor(timeMs(v, path) / 1000);
      return m;
    case Special.MicroTime: {
      m['seconds'] = Math.floor(timeMs(v, path) / 1000);
      // Date.parse keeps milliseconds; the microseconds come from the text.
      const nanos = Number((/\.(\d+)/.exec(v as string)?.[1] ?? '').padEnd(6, '0').slice(0, 6)) * 1000;
      if (nanos > 0) m['nanos'] = nanos;
      return m;
    }
    case Special.Quantity:
      if (typeof v !== 'string' && typeof v !== 'number') fail(path, `a quantity must be a string or a number, not ${JSON.stringify(v)}`);
      m['string'] = String(v);
      return m;
    case Special.IntOrString:
      if (typeof v === 'number' && v === (v | 0)) {
        m['type'] = 0;
        m['intVal'] = v;
      } else if (typeof v === 'string') {
        m['type'] = 1;
        m['strVal'] = v;
      } else fail(path, `expected a 32-bit integer or a string, got ${JSON.stringify(v)}`);
      return m;
    case Special.Embedded:
      m[plan.fields[0]!.local] = textEncoder.encode(JSON.stringify(v));
      return m;
    case Special.StringList:
      if (!Array.isArray(v)) fail(path, `expected a list of strings, got ${JSON.stringify(v)}`);
      m['items'] = v.map((item) => toScalar(ScalarType.STRING, item, path));
      return m;
    case Special.None:
      break;
  }
  if (!isObject(v)) fail(path, `expected an object, got ${JSON.stringify(v)}`);
  for (const f of plan.fields) {
    if (f.inline) {
      // An embedded Go struct: its fields are the parent's own JSON fields.
      m[f.local] = toMessage(f.message!, v, path);
      continue;
    }
    const fv = v[f.json];
    if (fv === undefined || fv === null) continue;
    // Paths are only for error messages: build them lazily.
    const fpath = path + '.' + f.json;
    switch (f.kind) {
      case 'list':
        if (!Array.isArray(fv)) fail(fpath, `expected a list, got ${JSON.stringify(fv)}`);
        m[f.local] = fv.map((item) => toValue(f, item, fpath));
        break;
      case 'map': {
        if (!isObject(fv)) fail(fpath, `expected a map, got ${JSON.stringify(fv)}`);
        // Go writes map entries sorted by key (the writer follows the object's key order).
        const map: Record<string, unknown> = {};
        for (const key of Object.keys(fv).sort()) map[key] = toValue(f, fv[key] ?? zeroJson(f), `${fpath}[${key}]`);
        m[f.local] = map;
        break;
      }
      default:
        m[f.local] = toValue(f, fv, fpath);
    }
  }
  return m;
}

function toValue(f: FieldPlan, v: Json, path: string): unknown {
  return f.message ? toMessage(f.message, v, path) : toScalar(f.scalar!, v, path);
}

function encode(desc: DescMessage, v: Json, path: string): Uint8Array {
  const m = toMessage(desc, v, path);
  try {
    return toBinary(desc, m as never);
  } catch (e) {
    throw new ProtobufError(`${path}: ${(e as Error).message}`);
  }
}

/** The bare message bytes of `type` for a JSON object (no envelope). */
export function encodeMessage(type: string, v: unknown): Uint8Array {
  return encode(descOf(type), v as Json, type);
}

/**
 * The protobuf body for an object the server returns (`k8s\0` + Unknown),
 * or undefined when its kind is not one the server speaks protobuf for.
 */
export function encodeObject(obj: Record<string, unknown>): Uint8Array | undefined {
  const apiVersion = obj['apiVersion'];
  const kind = obj['kind'];
  if (typeof apiVersion !== 'string' || typeof kind !== 'string') return undefined;
  const type = messageFor(apiVersion, kind);
  if (!type) return undefined;
  const unknown = descOf(UNKNOWN);
  const envelope = toBinary(unknown, {
    $typeName: unknown.typeName,
    typeMeta: { $typeName: descOf(TYPE_META).typeName, apiVersion, kind },
    raw: encode(descOf(type), obj as Json, kind),
  } as never);
  const body = new Uint8Array(MAGIC.length + envelope.length);
  body.set(MAGIC, 0);
  body.set(envelope, MAGIC.length);
  return body;
}
