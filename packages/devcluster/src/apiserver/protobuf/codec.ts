// One file of 470 lines: the two directions of the JSON <-> message mapping share its plans and change together.
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
 */
import { fromBinary, ScalarType, toBinary, type DescField, type DescMessage } from '@bufbuild/protobuf';
import { fullName, messageDesc, shortName } from './descriptors.ts';
import { INLINE, KINDS } from './k8s-kinds.generated.ts';

export const PROTOBUF_MEDIA_TYPE = 'application/vnd.kubernetes.protobuf';
const MAGIC = [0x6b, 0x38, 0x73, 0x00] as const;

type Json = null | boolean | number | string | Json[] | { [k: string]: Json };
type JsonObject = { [k: string]: Json };
/** A message as @bufbuild/protobuf reads and writes it: a plain object keyed by the fields' local names. */
type Message = { $typeName: string; [local: string]: unknown };

export class ProtobufError extends Error {
  override readonly name = 'ProtobufError';
}

/** The message of `apiVersion`/`kind`, if the server speaks protobuf for it. */
export function messageFor(apiVersion: string, kind: string): string | undefined {
  const exact = KINDS[`${apiVersion}/${kind}`];
  if (exact) return exact;
  // Status, DeleteOptions and WatchEvent come under any built-in group
  // version, never under a custom resource's group (a CRD may define a kind "Status").
  return BUILTIN_VERSIONS.has(apiVersion) ? KINDS[`*/${kind}`] : undefined;
}

const BUILTIN_VERSIONS = new Set(['meta.k8s.io/v1', ...Object.keys(KINDS).filter((k) => !k.startsWith('*/')).map((k) => k.slice(0, k.lastIndexOf('/')))]);

/**
 * Non-pointer Go fields tagged `omitempty` whose zero (0 / false) Go writes to
 * the wire for every object that leaves them unset, as in what kubectl's
 * generators send (read from the Go types; the descriptor cannot tell a
 * pointer from a value). Dropped on decode, so a created object shows what a
 * real cluster shows; everywhere else a decoded 0 / false is kept, since for
 * pointer fields (privileged, runAsUser, replicas) it is the user's choice.
 */
export const OMIT_ZERO: ReadonlySet<string> = new Set([
  'apis.meta.v1.ObjectMeta.generation',
  'core.v1.Container.stdin', 'core.v1.Container.stdinOnce', 'core.v1.Container.tty',
  'core.v1.EphemeralContainerCommon.stdin', 'core.v1.EphemeralContainerCommon.stdinOnce', 'core.v1.EphemeralContainerCommon.tty',
  'core.v1.PodSpec.hostNetwork', 'core.v1.PodSpec.hostPID', 'core.v1.PodSpec.hostIPC', 'core.v1.PodSpec.hostUsers',
  'core.v1.ContainerPort.hostPort', 'core.v1.VolumeMount.readOnly',
  'core.v1.Probe.initialDelaySeconds', 'core.v1.Probe.timeoutSeconds', 'core.v1.Probe.periodSeconds', 'core.v1.Probe.successThreshold', 'core.v1.Probe.failureThreshold',
  'core.v1.ServicePort.nodePort', 'core.v1.ServiceSpec.publishNotReadyAddresses', 'core.v1.ServiceSpec.healthCheckNodePort',
  'core.v1.Event.count', 'core.v1.NodeSpec.unschedulable',
  'apps.v1.DeploymentSpec.minReadySeconds', 'apps.v1.DeploymentSpec.paused', 'apps.v1.ReplicaSetSpec.minReadySeconds',
  'apps.v1.StatefulSetSpec.minReadySeconds', 'apps.v1.DaemonSetSpec.minReadySeconds',
]);

// ---------------------------------------------------------------- plans

/** Messages with a JSON form of their own. */
const Special = { None: 0, Time: 1, MicroTime: 2, Quantity: 3, IntOrString: 4, Embedded: 5, StringList: 6 } as const;
type Special = (typeof Special)[keyof typeof Special];
const SPECIAL: ReadonlyMap<string, Special> = new Map<string, Special>([
  [fullName('apis.meta.v1.Time'), Special.Time],
  [fullName('apis.meta.v1.MicroTime'), Special.MicroTime],
  [fullName('api.resource.Quantity'), Special.Quantity],
  [fullName('util.intstr.IntOrString'), Special.IntOrString],
  [fullName('runtime.RawExtension'), Special.Embedded],
  [fullName('apis.meta.v1.FieldsV1'), Special.Embedded],
]);

/** A field with what the hot loops need precomputed. */
interface FieldPlan {
  field: DescField;
  kind: DescField['fieldKind'];
  json: string;
  local: string;
  /** The scalar type of a scalar, list-of-scalar or map-to-scalar field. */
  scalar: ScalarType | undefined;
  /** The message of a message, list-of-message or map-to-message field. */
  message: DescMessage | undefined;
  inline: boolean;
  omitZero: boolean;
}

interface Plan {
  special: Special;
  fields: FieldPlan[];
  /** Prototype of written messages: $typeName, and shared empty lists and maps (the writer reads every list and map). */
  proto: object;
}

const EMPTY_LIST: readonly unknown[] = Object.freeze([]);
const EMPTY_MAP: Readonly<Record<string, unknown>> = Object.freeze({});
const plans = new WeakMap<DescMessage, Plan>();

function planOf(desc: DescMessage): Plan {
  let plan = plans.get(desc);
  if (plan) return plan;
  const short = shortName(desc);
  const fields = desc.fields.map((field): FieldPlan => ({
    field,
    kind: field.fieldKind,
    json: field.jsonName,
    local: field.localName,
    scalar: field.scalar,
    message: field.message,
    inline: INLINE.has(`${short}.${field.name}`),
    omitZero: OMIT_ZERO.has(`${short}.${field.jsonName}`),
  }));
  const only = desc.fields.length === 1 ? desc.fields[0]! : undefined;
  const stringList = only?.name === 'items' && only.fieldKind === 'list' && only.scalar === ScalarType.STRING;
  const proto: Record<string, unknown> = { $typeName: desc.typeName };
  for (const f of desc.fields) {
    if (f.fieldKind === 'list') proto[f.localName] = EMPTY_LIST;
    else if (f.fieldKind === 'map') proto[f.localName] = EMPTY_MAP;
  }
  plan = { special: SPECIAL.get(desc.typeName) ?? (stringList ? Special.StringList : Special.None), fields, proto };
  plans.set(desc, plan);
  return plan;
}

function descOf(type: string): DescMessage {
  const desc = messageDesc(type);
  if (!desc) throw new ProtobufError(`no protobuf message ${type}`);
  return desc;
}

// ---------------------------------------------------------------- JSON -> message

function isObject(v: unknown): v is JsonObject {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

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

/** The JSON of a map value Go leaves out (null in JSON): its type's zero. */
function zeroJson(f: FieldPlan): Json {
  if (!f.message) return f.scalar === ScalarType.BOOL ? false : f.scalar === ScalarType.STRING || f.scalar === ScalarType.BYTES ? '' : 0;
  const special = planOf(f.message).special;
  return special === Special.Quantity ? '' : special === Special.IntOrString ? 0 : special === Special.StringList ? [] : {};
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

const UNKNOWN = 'runtime.Unknown';
const TYPE_META = 'runtime.TypeMeta';

// ---------------------------------------------------------------- message -> JSON

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

function hasMagic(b: Uint8Array): boolean {
  return b.length >= 4 && b[0] === MAGIC[0] && b[1] === MAGIC[1] && b[2] === MAGIC[2] && b[3] === MAGIC[3];
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
