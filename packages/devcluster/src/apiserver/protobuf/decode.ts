/** message -> JSON: a protobuf request body as the object it stands for (see codec.ts for the mapping). */
import { fromBinary, ScalarType, type DescMessage } from '@bufbuild/protobuf';
import { isObject } from '../../is-object.ts';
import { descOf, hasMagic, messageFor, planOf, ProtobufError, Special, UNKNOWN, zeroJson, type FieldPlan, type Json, type JsonObject, type Message } from './plan.ts';

const strictText = new TextDecoder('utf-8', { fatal: true });

function pad(n: number, width: number): string {
  return String(n).padStart(width, '0');
}

function formatTime(seconds: number, micros: number | undefined): string {
  const d = new Date(seconds * 1000);
  const base = `${pad(d.getUTCFullYear(), 4)}-${pad(d.getUTCMonth() + 1, 2)}-${pad(d.getUTCDate(), 2)}T${pad(d.getUTCHours(), 2)}:${pad(d.getUTCMinutes(), 2)}:${pad(d.getUTCSeconds(), 2)}`;
  return micros === undefined ? `${base}Z` : `${base}.${pad(micros, 6)}Z`;
}

const own = (m: Message, local: string): boolean => Object.prototype.hasOwnProperty.call(m, local) && m[local] !== undefined;

/** The JSON value of a decoded message (undefined = absent, e.g. a zero time). */
function fromMessage(desc: DescMessage, m: Message, depth: number): Json | undefined {
  const plan = planOf(desc);
  switch (plan.special) {
    case Special.Time:
    case Special.MicroTime: {
      // An empty message is Go's zero time, which its JSON writes as null.
      if (!own(m, 'seconds') && !own(m, 'nanos')) return undefined;
      const seconds = Number(m['seconds'] ?? 0);
      // Time has one-second precision (Go ignores nanos); MicroTime keeps microseconds.
      return formatTime(seconds, plan.special === Special.MicroTime ? Math.floor(Number(m['nanos'] ?? 0) / 1000) : undefined);
    }
    case Special.Quantity:
      return (m['string'] as string | undefined) ?? '';
    case Special.IntOrString:
      return Number(m['type'] ?? 0) === 1 ? ((m['strVal'] as string | undefined) ?? '') : ((m['intVal'] as number | undefined) ?? 0);
    case Special.Embedded: {
      const raw = m[plan.fields[0]!.local] as Uint8Array | undefined;
      return raw && raw.length > 0 ? decodeEmbedded(raw, depth) : undefined;
    }
    case Special.StringList:
      return [...(m['items'] as string[])];
    case Special.None:
      break;
  }
  const out: JsonObject = {};
  for (const f of plan.fields) {
    const value = m[f.local];
    switch (f.kind) {
      case 'list': {
        const list = value as unknown[];
        if (list.length > 0) out[f.json] = list.map((item) => fromValue(f, item, depth) ?? zeroJson(f));
        break;
      }
      case 'map': {
        const keys = Object.keys(value as object);
        if (keys.length === 0) break;
        const map: JsonObject = {};
        for (const key of keys) map[key] = fromValue(f, (value as Record<string, unknown>)[key], depth) ?? (f.message ? null : zeroJson(f));
        out[f.json] = map;
        break;
      }
      default: {
        if (!own(m, f.local)) break;
        const v = fromValue(f, value, depth);
        if (f.inline) {
          if (isObject(v ?? null)) Object.assign(out, v);
        } else if (v !== undefined && v !== '' && !(f.omitZero && (v === 0 || v === false))) out[f.json] = v;
      }
    }
  }
  return out;
}

function fromValue(f: FieldPlan, v: unknown, depth: number): Json | undefined {
  if (f.message) return fromMessage(f.message, v as Message, depth);
  switch (f.scalar) {
    case ScalarType.INT64:
      return Number(v as bigint);
    case ScalarType.BYTES: {
      const b = v as Uint8Array;
      return Buffer.from(b.buffer, b.byteOffset, b.byteLength).toString('base64');
    }
    default:
      return v as Json;
  }
}

function decode(desc: DescMessage, bytes: Uint8Array, depth: number): Json | undefined {
  let m: Message;
  try {
    m = fromBinary(desc, bytes, { readUnknownFields: false }) as unknown as Message;
  } catch (e) {
    throw new ProtobufError((e as Error).message);
  }
  return fromMessage(desc, m, depth);
}

/** Nesting of protobuf objects inside RawExtensions that a body may use (each level decodes anew). */
const MAX_EMBEDDED_DEPTH = 8;

/** RawExtension/FieldsV1 bytes: JSON, or a protobuf object when it carries the magic prefix. */
function decodeEmbedded(raw: Uint8Array, depth: number): Json {
  if (hasMagic(raw)) {
    if (depth >= MAX_EMBEDDED_DEPTH) throw new ProtobufError(`objects embedded more than ${MAX_EMBEDDED_DEPTH} deep`);
    return decodeEnvelope(raw, depth + 1) as Json;
  }
  try {
    return JSON.parse(strictText.decode(raw)) as Json;
  } catch {
    throw new ProtobufError('an embedded object is neither JSON nor protobuf');
  }
}

/** The JSON object of message `type` in `bytes` (no envelope). */
export function decodeMessage(type: string, bytes: Uint8Array): Record<string, unknown> {
  const v = decode(descOf(type), bytes, 0);
  if (!isObject(v ?? null)) throw new ProtobufError(`${type} is not an object message`);
  return v as Record<string, unknown>;
}

/**
 * A protobuf request body (`k8s\0` + Unknown) as the JSON object it stands
 * for, with apiVersion and kind from the envelope. Throws ProtobufError with
 * a message fit for a 400 (or 415 for a kind without a protobuf form).
 */
export function decodeObject(body: Uint8Array): Record<string, unknown> {
  return decodeEnvelope(body, 0);
}

function decodeEnvelope(body: Uint8Array, depth: number): Record<string, unknown> {
  if (!hasMagic(body)) throw new ProtobufError('provided object is not protobuf: it does not start with the "k8s\\0" prefix');
  if (body.length === 4) throw new ProtobufError('empty protobuf body after the "k8s\\0" prefix');
  let envelope: Message;
  try {
    envelope = fromBinary(descOf(UNKNOWN), body.subarray(4), { readUnknownFields: false }) as unknown as Message;
  } catch (e) {
    throw new ProtobufError((e as Error).message);
  }
  const typeMeta = envelope['typeMeta'] as Message | undefined;
  const apiVersion = (typeMeta?.['apiVersion'] as string | undefined) ?? '';
  const kind = (typeMeta?.['kind'] as string | undefined) ?? '';
  const contentEncoding = (envelope['contentEncoding'] as string | undefined) ?? '';
  const contentType = (envelope['contentType'] as string | undefined) ?? '';
  if (!apiVersion || !kind) throw new ProtobufError('the protobuf envelope has no apiVersion and kind');
  if (contentEncoding) throw new ProtobufError(`unsupported content encoding ${JSON.stringify(contentEncoding)} in the protobuf envelope`);
  const bytes = (envelope['raw'] as Uint8Array | undefined) ?? new Uint8Array(0);
  if (contentType && !contentType.includes('protobuf')) {
    let parsed: unknown;
    try {
      parsed = JSON.parse(strictText.decode(bytes));
    } catch {
      throw new ProtobufError(`the embedded ${contentType} is not JSON`);
    }
    if (!isObject((parsed ?? null) as Json)) throw new ProtobufError('the embedded JSON is not an object');
    return { apiVersion, kind, ...(parsed as Record<string, unknown>) };
  }
  const type = messageFor(apiVersion, kind);
  if (!type) throw new UnsupportedKind(apiVersion, kind);
  const v = decode(descOf(type), bytes, depth);
  if (!isObject(v ?? null)) throw new ProtobufError(`${type} is not an object message`);
  return { apiVersion, kind, ...(v as Record<string, unknown>) };
}

/** A well-formed envelope for a kind without a protobuf form here (→ 415). */
export class UnsupportedKind extends ProtobufError {
  constructor(readonly apiVersion: string, readonly kind: string) {
    super(`no protobuf serialization of ${apiVersion}, Kind=${kind}: send it as application/json`);
  }
}
