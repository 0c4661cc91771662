/**
 * `application/vnd.kubernetes.protobuf` for the built-in kinds: the JSON
 * form the server stores <-> proto2 bytes, driven by the field tables in
 * k8s-types.generated.ts (see PROVENANCE.md for the wire-format sources).
 *
 * A body is the magic `k8s\0` and one runtime.Unknown {typeMeta, raw,
 * contentEncoding, contentType} whose `raw` is the object's message. The
 * JSON <-> message mapping follows Go's JSON of the same types: Time and
 * MicroTime are RFC 3339 strings, Quantity a string, IntOrString a number
 * or a string, RawExtension and FieldsV1 embedded JSON, bytes base64, and
 * string-list wrappers (ExtraValue, Verbs) plain arrays.
 *
 * Decoding what a Go client sends: Go writes every non-pointer field, so
 * zero values arrive for fields the user never set. Empty strings and zero
 * times are dropped (Go's JSON omits them too), and so are 0 / false of the
 * known non-pointer `omitempty` fields (OMIT_ZERO); other numbers and
 * booleans are kept, because for pointer fields (runAsUser: 0,
 * privileged: false) the zero is the user's choice and a policy must see it.
 */
import { KINDS, MESSAGES, type FieldRow } from './k8s-types.generated.ts';

export const PROTOBUF_MEDIA_TYPE = 'application/vnd.kubernetes.protobuf';
const MAGIC = [0x6b, 0x38, 0x73, 0x00] as const;

type Json = null | boolean | number | string | Json[] | { [k: string]: Json };
type JsonObject = { [k: string]: Json };

export class ProtobufError extends Error {
  override readonly name = 'ProtobufError';
}

const TIME = 'apis.meta.v1.Time';
const MICRO_TIME = 'apis.meta.v1.MicroTime';
const QUANTITY = 'api.resource.Quantity';
const INT_OR_STRING = 'util.intstr.IntOrString';
const RAW_EXTENSION = 'runtime.RawExtension';
const FIELDS_V1 = 'apis.meta.v1.FieldsV1';
const UNKNOWN_FIELDS: readonly FieldRow[] = [['typeMeta', 1, 'runtime.TypeMeta', 0], ['raw', 2, 'bytes', 0], ['contentEncoding', 3, 'string', 0], ['contentType', 4, 'string', 0]];

/** Messages whose Go type is a []string: JSON is the array itself. */
const STRING_LISTS = new Set(Object.entries(MESSAGES).filter(([, rows]) => rows.length === 1 && rows[0]![0] === 'items' && rows[0]![3] === 1 && rows[0]![2] === 'string').map(([n]) => n));

/** The message of `apiVersion`/`kind`, if the server speaks protobuf for it. */
export function messageFor(apiVersion: string, kind: string): string | undefined {
  const exact = KINDS[`${apiVersion}/${kind}`];
  if (exact) return exact;
  // Status, DeleteOptions and WatchEvent come under any built-in group
  // version, never under a custom resource's group (a CRD may define a kind "Status").
  return BUILTIN_VERSIONS.has(apiVersion) ? KINDS[`*/${kind}`] : undefined;
}

const BUILTIN_VERSIONS = new Set(['meta.k8s.io/v1', ...Object.keys(KINDS).filter((k) => !k.startsWith('*/')).map((k) => k.slice(0, k.lastIndexOf('/')))]);

// ---------------------------------------------------------------- writing

const encoder = new TextEncoder();

class Writer {
  buf = new Uint8Array(256);
  pos = 0;

  ensure(n: number): void {
    if (this.pos + n <= this.buf.length) return;
    let size = this.buf.length * 2;
    while (size < this.pos + n) size *= 2;
    const next = new Uint8Array(size);
    next.set(this.buf.subarray(0, this.pos));
    this.buf = next;
  }

  /** An unsigned varint (0 <= n < 2^53). */
  uvarint(n: number): void {
    this.ensure(10);
    while (n > 0x7f) {
      this.buf[this.pos++] = (n % 0x80) | 0x80;
      n = Math.floor(n / 0x80);
    }
    this.buf[this.pos++] = n;
  }

  /** int32/int64 as protobuf writes them: negatives are 64-bit two's complement (10 bytes). */
  varint(n: number): void {
    if (n >= 0) return this.uvarint(n);
    let v = BigInt.asUintN(64, BigInt(n));
    this.ensure(10);
    while (v > 0x7fn) {
      this.buf[this.pos++] = Number(v & 0x7fn) | 0x80;
      v >>= 7n;
    }
    this.buf[this.pos++] = Number(v);
  }

  tag(id: number, wire: number): void {
    this.uvarint(id * 8 + wire);
  }

  bytes(b: Uint8Array): void {
    this.uvarint(b.length);
    this.ensure(b.length);
    this.buf.set(b, this.pos);
    this.pos += b.length;
  }

  string(s: string): void {
    // Short ASCII strings (names, labels, images) are the common case: a
    // plain loop beats TextEncoder's per-call cost.
    const n = s.length;
    if (n < 128) {
      this.ensure(1 + n * 3);
      const buf = this.buf;
      const start = this.pos;
      let p = start + 1;
      let i = 0;
      for (; i < n; i++) {
        const c = s.charCodeAt(i);
        if (c >= 0x80) break;
        buf[p++] = c;
      }
      if (i === n) {
        buf[start] = n;
        this.pos = p;
        return;
      }
      this.pos = start + 1;
      const { written } = encoder.encodeInto(s, buf.subarray(this.pos));
      this.pos += written;
      if (written < 128) {
        buf[start] = written;
        return;
      }
      this.closeLength(start, written);
      return;
    }
    this.bytes(encoder.encode(s));
  }

  /** Starts a length-delimited value: one byte is reserved for its length. */
  open(): number {
    this.ensure(1);
    return this.pos++;
  }

  /** Writes the length of what followed `open()`, moving the value if it needs more than one byte. */
  close(start: number): void {
    const len = this.pos - start - 1;
    if (len < 128) {
      this.buf[start] = len;
      return;
    }
    this.closeLength(start, len);
  }

  private closeLength(start: number, len: number): void {
    let size = 0;
    for (let n = len; n > 0; n = Math.floor(n / 0x80)) size++;
    this.ensure(size - 1);
    this.buf.copyWithin(start + size, start + 1, this.pos);
    let p = start;
    let n = len;
    while (n > 0x7f) {
      this.buf[p++] = (n % 0x80) | 0x80;
      n = Math.floor(n / 0x80);
    }
    this.buf[p] = n;
    this.pos += size - 1;
  }

  finish(): Uint8Array {
    return this.buf.slice(0, this.pos);
  }
}

const WIRE_VARINT = 0;
const WIRE_64 = 1;
const WIRE_LEN = 2;
const WIRE_32 = 5;

function isObject(v: unknown): v is JsonObject {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function fail(path: string, what: string): never {
  throw new ProtobufError(`${path}: ${what}`);
}

function timeSeconds(v: Json, path: string): number {
  if (typeof v !== 'string') fail(path, `a time must be an RFC 3339 string, not ${JSON.stringify(v)}`);
  const ms = Date.parse(v);
  if (Number.isNaN(ms)) fail(path, `invalid time ${JSON.stringify(v)}`);
  return ms;
}

function writeScalar(w: Writer, type: string, id: number, v: Json, path: string): void {
  switch (type) {
    case 'string':
      if (typeof v !== 'string') fail(path, `expected a string, got ${JSON.stringify(v)}`);
      w.tag(id, WIRE_LEN);
      w.string(v);
      return;
    case 'int32':
    case 'int64':
      if (typeof v !== 'number' || !Number.isInteger(v)) fail(path, `expected an integer, got ${JSON.stringify(v)}`);
      w.tag(id, WIRE_VARINT);
      w.varint(v);
      return;
    case 'bool':
      if (typeof v !== 'boolean') fail(path, `expected a boolean, got ${JSON.stringify(v)}`);
      w.tag(id, WIRE_VARINT);
      w.uvarint(v ? 1 : 0);
      return;
    case 'bytes':
      if (typeof v !== 'string') fail(path, `expected base64 bytes, got ${JSON.stringify(v)}`);
      w.tag(id, WIRE_LEN);
      w.bytes(Buffer.from(v, 'base64'));
      return;
    default:
      fail(path, `unsupported scalar type ${type}`);
  }
}

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

/** A field row with what the hot loops need precomputed (MESSAGES is a large dictionary-mode object). */
interface Row { name: string; id: number; type: string; shape: 0 | 1 | 2 | 3; scalar: boolean; omitZero: boolean }
const compiled = new Map<string, Row[]>();

function rowsOf(type: string): Row[] | undefined {
  let rows = compiled.get(type);
  if (!rows) {
    const table = MESSAGES[type];
    if (!table) return undefined;
    rows = table.map(([name, id, ftype, shape]) => ({
      name, id, type: ftype, shape, scalar: MESSAGES[ftype] === undefined && !isSpecial(ftype), omitZero: OMIT_ZERO.has(`${type}.${name}`),
    }));
    compiled.set(type, rows);
  }
  return rows;
}

/** Writes the body (not the tag or length) of message `type` for the JSON value `v`. */
function writeMessage(w: Writer, type: string, v: Json, path: string): void {
  switch (type) {
    case TIME:
    case MICRO_TIME: {
      const ms = timeSeconds(v, path);
      const seconds = Math.floor(ms / 1000);
      w.tag(1, WIRE_VARINT);
      w.varint(seconds);
      if (type === MICRO_TIME) {
        // Date.parse keeps milliseconds; the microseconds come from the text.
        const frac = /\.(\d+)/.exec(v as string)?.[1] ?? '';
        const nanos = Number(frac.padEnd(6, '0').slice(0, 6)) * 1000;
        if (nanos > 0) {
          w.tag(2, WIRE_VARINT);
          w.varint(nanos);
        }
      }
      return;
    }
    case QUANTITY:
      if (typeof v !== 'string' && typeof v !== 'number') fail(path, `a quantity must be a string or a number, not ${JSON.stringify(v)}`);
      w.tag(1, WIRE_LEN);
      w.string(String(v));
      return;
    case INT_OR_STRING:
      if (typeof v === 'number') {
        if (!Number.isInteger(v)) fail(path, `expected an integer or a string, got ${v}`);
        w.tag(1, WIRE_VARINT);
        w.uvarint(0);
        w.tag(2, WIRE_VARINT);
        w.varint(v);
      } else if (typeof v === 'string') {
        w.tag(1, WIRE_VARINT);
        w.uvarint(1);
        w.tag(3, WIRE_LEN);
        w.string(v);
      } else fail(path, `expected an integer or a string, got ${JSON.stringify(v)}`);
      return;
    case RAW_EXTENSION:
    case FIELDS_V1:
      w.tag(1, WIRE_LEN);
      w.string(JSON.stringify(v));
      return;
    default:
      break;
  }
  const rows = rowsOf(type);
  if (!rows) fail(path, `no protobuf message ${type}`);
  if (STRING_LISTS.has(type)) {
    if (!Array.isArray(v)) fail(path, `expected a list of strings, got ${JSON.stringify(v)}`);
    for (const item of v) writeScalar(w, 'string', 1, item, path);
    return;
  }
  if (!isObject(v)) fail(path, `expected an object, got ${JSON.stringify(v)}`);
  for (const { name, id, type: ftype, shape, scalar } of rows) {
    if (shape === 3) {
      // An embedded Go struct: its fields are the parent's own JSON fields.
      w.tag(id, WIRE_LEN);
      const start = w.open();
      writeMessage(w, ftype, v, path);
      w.close(start);
      continue;
    }
    const fv = v[name];
    if (fv === undefined || fv === null) continue;
    // Paths are only for error messages: build them lazily.
    const fpath = path + '.' + name;
    if (shape === 1) {
      if (!Array.isArray(fv)) fail(fpath, `expected a list, got ${JSON.stringify(fv)}`);
      for (const item of fv) writeField(w, ftype, id, item, fpath, scalar);
    } else if (shape === 2) {
      if (!isObject(fv)) fail(fpath, `expected a map, got ${JSON.stringify(fv)}`);
      // Go writes map entries sorted by key.
      for (const key of Object.keys(fv).sort()) {
        const item = fv[key]!;
        w.tag(id, WIRE_LEN);
        const start = w.open();
        w.tag(1, WIRE_LEN);
        w.string(key);
        if (item !== null) writeField(w, ftype, 2, item, `${fpath}[${key}]`, scalar);
        w.close(start);
      }
    } else {
      writeField(w, ftype, id, fv, fpath, scalar);
    }
  }
}

function isSpecial(type: string): boolean {
  return type === TIME || type === MICRO_TIME || type === QUANTITY || type === INT_OR_STRING || type === RAW_EXTENSION || type === FIELDS_V1;
}

function writeField(w: Writer, type: string, id: number, v: Json, path: string, scalar: boolean): void {
  if (scalar) return writeScalar(w, type, id, v, path);
  w.tag(id, WIRE_LEN);
  const start = w.open();
  writeMessage(w, type, v, path);
  w.close(start);
}

/** The bare message bytes of `type` for a JSON object (no envelope). */
export function encodeMessage(type: string, v: unknown): Uint8Array {
  const w = new Writer();
  writeMessage(w, type, v as Json, type);
  return w.finish();
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
  const w = new Writer();
  w.ensure(4);
  w.buf.set(MAGIC, 0);
  w.pos = 4;
  w.tag(1, WIRE_LEN);
  const tm = w.open();
  w.tag(1, WIRE_LEN);
  w.string(apiVersion);
  w.tag(2, WIRE_LEN);
  w.string(kind);
  w.close(tm);
  w.tag(2, WIRE_LEN);
  const raw = w.open();
  writeMessage(w, type, obj as Json, kind);
  w.close(raw);
  return w.finish();
}

// ---------------------------------------------------------------- reading

const decoder = new TextDecoder('utf-8', { fatal: true });

class Reader {
  pos: number;
  constructor(readonly buf: Uint8Array, start: number, readonly end: number) {
    this.pos = start;
  }

  uvarint(): number {
    let result = 0;
    let mul = 1;
    for (let i = 0; i < 10; i++) {
      if (this.pos >= this.end) throw new ProtobufError('truncated varint');
      const b = this.buf[this.pos++]!;
      result += (b & 0x7f) * mul;
      if (b < 0x80) return result;
      mul *= 0x80;
    }
    throw new ProtobufError('varint longer than 10 bytes');
  }

  /** int32/int64: a value of 2^63 or more is a negative number. */
  varint(): number {
    const start = this.pos;
    const n = this.uvarint();
    if (n < 2 ** 63) return n;
    // Re-read exactly as 64-bit two's complement.
    let v = 0n;
    let shift = 0n;
    for (let p = start; p < this.pos; p++) {
      v |= BigInt(this.buf[p]! & 0x7f) << shift;
      shift += 7n;
    }
    return Number(BigInt.asIntN(64, v));
  }

  length(): number {
    const len = this.uvarint();
    if (this.pos + len > this.end) throw new ProtobufError('length-delimited field runs past the end of its message');
    return len;
  }

  skip(wire: number): void {
    switch (wire) {
      case WIRE_VARINT: this.uvarint(); return;
      case WIRE_64: this.pos += 8; break;
      case WIRE_LEN: this.pos += this.length(); return;
      case WIRE_32: this.pos += 4; break;
      default: throw new ProtobufError(`unsupported wire type ${wire}`);
    }
    if (this.pos > this.end) throw new ProtobufError('truncated field');
  }
}

interface FieldIndex {
  rows: Map<number, Row>;
}
const indexes = new Map<string, FieldIndex>();

function indexOf(type: string): FieldIndex {
  let ix = indexes.get(type);
  if (!ix) {
    const rows = rowsOf(type);
    if (!rows) throw new ProtobufError(`no protobuf message ${type}`);
    ix = { rows: new Map(rows.map((r) => [r.id, r])) };
    indexes.set(type, ix);
  }
  return ix;
}

function readScalar(r: Reader, type: string, wire: number): Json {
  switch (type) {
    case 'string': {
      if (wire !== WIRE_LEN) throw new ProtobufError(`string field with wire type ${wire}`);
      const len = r.length();
      const s = decoder.decode(r.buf.subarray(r.pos, r.pos + len));
      r.pos += len;
      return s;
    }
    case 'bytes': {
      if (wire !== WIRE_LEN) throw new ProtobufError(`bytes field with wire type ${wire}`);
      const len = r.length();
      const s = Buffer.from(r.buf.buffer, r.buf.byteOffset + r.pos, len).toString('base64');
      r.pos += len;
      return s;
    }
    case 'int32':
    case 'int64': {
      const n = r.varint();
      return type === 'int32' ? n | 0 : n;
    }
    case 'bool':
      return r.uvarint() !== 0;
    default:
      throw new ProtobufError(`unsupported scalar type ${type}`);
  }
}

function pad(n: number, width: number): string {
  return String(n).padStart(width, '0');
}

function formatTime(seconds: number, micros: number | undefined): string {
  const d = new Date(seconds * 1000);
  const base = `${pad(d.getUTCFullYear(), 4)}-${pad(d.getUTCMonth() + 1, 2)}-${pad(d.getUTCDate(), 2)}T${pad(d.getUTCHours(), 2)}:${pad(d.getUTCMinutes(), 2)}:${pad(d.getUTCSeconds(), 2)}`;
  return micros === undefined ? `${base}Z` : `${base}.${pad(micros, 6)}Z`;
}

/** Reads the message `type` in r.buf[start, end) as its JSON value (undefined = absent, e.g. a zero time). */
function readMessage(buf: Uint8Array, start: number, end: number, type: string): Json | undefined {
  const r = new Reader(buf, start, end);
  switch (type) {
    case TIME:
    case MICRO_TIME: {
      // An empty message is Go's zero time, which its JSON writes as null.
      if (start === end) return undefined;
      let seconds = 0;
      let nanos = 0;
      while (r.pos < end) {
        const key = r.uvarint();
        if (key === 8) seconds = r.varint();
        else if (key === 16) nanos = r.varint();
        else r.skip(key & 7);
      }
      // Time has one-second precision (Go ignores nanos); MicroTime keeps microseconds.
      return formatTime(seconds, type === MICRO_TIME ? Math.floor(nanos / 1000) : undefined);
    }
    case QUANTITY: {
      let s = '';
      while (r.pos < end) {
        const key = r.uvarint();
        if (key === 10) s = readScalar(r, 'string', WIRE_LEN) as string;
        else r.skip(key & 7);
      }
      return s;
    }
    case INT_OR_STRING: {
      let kind = 0;
      let intVal = 0;
      let strVal = '';
      while (r.pos < end) {
        const key = r.uvarint();
        if (key === 8) kind = r.varint();
        else if (key === 16) intVal = r.varint() | 0;
        else if (key === 26) strVal = readScalar(r, 'string', WIRE_LEN) as string;
        else r.skip(key & 7);
      }
      return kind === 1 ? strVal : intVal;
    }
    case RAW_EXTENSION:
    case FIELDS_V1: {
      let raw: Uint8Array | undefined;
      while (r.pos < end) {
        const key = r.uvarint();
        if (key === 10) {
          const len = r.length();
          raw = buf.subarray(r.pos, r.pos + len);
          r.pos += len;
        } else r.skip(key & 7);
      }
      if (!raw || raw.length === 0) return undefined;
      return decodeEmbedded(raw);
    }
    default:
      break;
  }
  const { rows } = indexOf(type);
  if (STRING_LISTS.has(type)) {
    const items: Json[] = [];
    while (r.pos < end) {
      const key = r.uvarint();
      if (key === 10) items.push(readScalar(r, 'string', WIRE_LEN));
      else r.skip(key & 7);
    }
    return items;
  }
  const out: JsonObject = {};
  while (r.pos < end) {
    const key = r.uvarint();
    const id = Math.floor(key / 8);
    const wire = key & 7;
    const row = rows.get(id);
    if (!row) {
      r.skip(wire);
      continue;
    }
    const { name, type: ftype, shape, scalar, omitZero } = row;
    if (shape === 2) {
      const len = r.length();
      const entryEnd = r.pos + len;
      let k = '';
      let value: Json | undefined;
      while (r.pos < entryEnd) {
        const ek = r.uvarint();
        if (ek === 10) k = readScalar(r, 'string', WIRE_LEN) as string;
        else if (ek >>> 3 === 2) value = readValue(r, ftype, ek & 7, scalar);
        else r.skip(ek & 7);
      }
      r.pos = entryEnd;
      const map = (out[name] ??= {}) as JsonObject;
      map[k] = value ?? zeroValue(ftype);
      continue;
    }
    if (shape === 1 && scalar && wire === WIRE_LEN && ftype !== 'string' && ftype !== 'bytes') {
      // Packed repeated numbers (Go writes them unpacked, but both are valid proto2).
      const len = r.length();
      const packedEnd = r.pos + len;
      const list = (out[name] ??= []) as Json[];
      while (r.pos < packedEnd) list.push(readScalar(r, ftype, WIRE_VARINT));
      continue;
    }
    const value = readValue(r, ftype, wire, scalar);
    if (shape === 3) {
      if (isObject(value ?? null)) Object.assign(out, value);
      continue;
    }
    if (shape === 1) {
      ((out[name] ??= []) as Json[]).push(value ?? zeroValue(ftype));
    } else if (value !== undefined && value !== '' && !(omitZero && (value === 0 || value === false))) {
      out[name] = value;
    }
  }
  return out;
}

function zeroValue(type: string): Json {
  switch (type) {
    case 'string':
    case 'bytes':
    case QUANTITY:
      return '';
    case 'int32':
    case 'int64':
    case INT_OR_STRING:
      return 0;
    case 'bool':
      return false;
    case TIME:
    case MICRO_TIME:
    case RAW_EXTENSION:
    case FIELDS_V1:
      return null;
    default:
      return STRING_LISTS.has(type) ? [] : {};
  }
}

function readValue(r: Reader, type: string, wire: number, scalar: boolean): Json | undefined {
  if (scalar) return readScalar(r, type, wire);
  if (wire !== WIRE_LEN) throw new ProtobufError(`message field of type ${type} with wire type ${wire}`);
  const len = r.length();
  const v = readMessage(r.buf, r.pos, r.pos + len, type);
  r.pos += len;
  return v;
}

/** RawExtension/FieldsV1 bytes: JSON, or a protobuf object when it carries the magic prefix. */
function decodeEmbedded(raw: Uint8Array): Json {
  if (hasMagic(raw)) return decodeObject(raw) as Json;
  try {
    return JSON.parse(decoder.decode(raw)) as Json;
  } catch {
    throw new ProtobufError('an embedded object is neither JSON nor protobuf');
  }
}

function hasMagic(b: Uint8Array): boolean {
  return b.length >= 4 && b[0] === MAGIC[0] && b[1] === MAGIC[1] && b[2] === MAGIC[2] && b[3] === MAGIC[3];
}

/** The JSON object of message `type` in `bytes` (no envelope). */
export function decodeMessage(type: string, bytes: Uint8Array): Record<string, unknown> {
  const v = readMessage(bytes, 0, bytes.length, type);
  if (!isObject(v ?? null)) throw new ProtobufError(`${type} is not an object message`);
  return v as Record<string, unknown>;
}

/**
 * A protobuf request body (`k8s\0` + Unknown) as the JSON object it stands
 * for, with apiVersion and kind from the envelope. Throws ProtobufError with
 * a message fit for a 400 (or 415 for a kind without a protobuf form).
 */
export function decodeObject(body: Uint8Array): Record<string, unknown> {
  if (!hasMagic(body)) throw new ProtobufError('provided object is not protobuf: it does not start with the "k8s\\0" prefix');
  if (body.length === 4) throw new ProtobufError('empty protobuf body after the "k8s\\0" prefix');
  const r = new Reader(body, 4, body.length);
  let apiVersion = '';
  let kind = '';
  let raw: Uint8Array | undefined;
  let contentType = '';
  let contentEncoding = '';
  while (r.pos < r.end) {
    const key = r.uvarint();
    const id = key >>> 3;
    const row = UNKNOWN_FIELDS[id - 1];
    if (!row || (key & 7) !== WIRE_LEN) {
      r.skip(key & 7);
      continue;
    }
    const len = r.length();
    const slice = body.subarray(r.pos, r.pos + len);
    r.pos += len;
    if (id === 1) {
      const tm = new Reader(slice, 0, slice.length);
      while (tm.pos < tm.end) {
        const k = tm.uvarint();
        if (k === 10) apiVersion = readScalar(tm, 'string', WIRE_LEN) as string;
        else if (k === 18) kind = readScalar(tm, 'string', WIRE_LEN) as string;
        else tm.skip(k & 7);
      }
    } else if (id === 2) raw = slice;
    else if (id === 3) contentEncoding = decoder.decode(slice);
    else contentType = decoder.decode(slice);
  }
  if (!apiVersion || !kind) throw new ProtobufError('the protobuf envelope has no apiVersion and kind');
  if (contentEncoding) throw new ProtobufError(`unsupported content encoding ${JSON.stringify(contentEncoding)} in the protobuf envelope`);
  const bytes = raw ?? new Uint8Array(0);
  if (contentType && !contentType.includes('protobuf')) {
    const parsed: unknown = JSON.parse(decoder.decode(bytes));
    if (!isObject((parsed ?? null) as Json)) throw new ProtobufError('the embedded JSON is not an object');
    return { apiVersion, kind, ...(parsed as Record<string, unknown>) };
  }
  const type = messageFor(apiVersion, kind);
  if (!type) throw new UnsupportedKind(apiVersion, kind);
  return { apiVersion, kind, ...decodeMessage(type, bytes) };
}

/** A well-formed envelope for a kind without a protobuf form here (→ 415). */
export class UnsupportedKind extends ProtobufError {
  constructor(readonly apiVersion: string, readonly kind: string) {
    super(`no protobuf serialization of ${apiVersion}, Kind=${kind}: send it as application/json`);
  }
}
