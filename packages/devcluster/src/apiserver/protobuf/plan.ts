/**
 * What both directions of the protobuf codec (codec.ts) share: the media
 * type and envelope constants, which message serves which kind, and a plan
 * per message (its fields with what the hot loops need precomputed).
 */
import { ScalarType, type DescField, type DescMessage } from '@bufbuild/protobuf';
import { fullName, messageDesc, shortName } from './descriptors.ts';
import { INLINE, KINDS } from './k8s-kinds.generated.ts';

export const PROTOBUF_MEDIA_TYPE = 'application/vnd.kubernetes.protobuf';

export const MAGIC = [0x6b, 0x38, 0x73, 0x00] as const;

export const UNKNOWN = 'runtime.Unknown';
export const TYPE_META = 'runtime.TypeMeta';

export type Json = null | boolean | number | string | Json[] | { [k: string]: Json };
export type JsonObject = { [k: string]: Json };
/** A message as @bufbuild/protobuf reads and writes it: a plain object keyed by the fields' local names. */
export type Message = { $typeName: string; [local: string]: unknown };

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

/** Messages with a JSON form of their own. */
export const Special = { None: 0, Time: 1, MicroTime: 2, Quantity: 3, IntOrString: 4, Embedded: 5, StringList: 6 } as const;
export type Special = (typeof Special)[keyof typeof Special];
const SPECIAL: ReadonlyMap<string, Special> = new Map<string, Special>([
  [fullName('apis.meta.v1.Time'), Special.Time],
  [fullName('apis.meta.v1.MicroTime'), Special.MicroTime],
  [fullName('api.resource.Quantity'), Special.Quantity],
  [fullName('util.intstr.IntOrString'), Special.IntOrString],
  [fullName('runtime.RawExtension'), Special.Embedded],
  [fullName('apis.meta.v1.FieldsV1'), Special.Embedded],
]);

/** A field with what the hot loops need precomputed. */
export interface FieldPlan {
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

export function planOf(desc: DescMessage): Plan {
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

export function descOf(type: string): DescMessage {
  const desc = messageDesc(type);
  if (!desc) throw new ProtobufError(`no protobuf message ${type}`);
  return desc;
}

/** The JSON of a map value Go leaves out (null in JSON): its type's zero. */
export function zeroJson(f: FieldPlan): Json {
  if (!f.message) return f.scalar === ScalarType.BOOL ? false : f.scalar === ScalarType.STRING || f.scalar === ScalarType.BYTES ? '' : 0;
  const special = planOf(f.message).special;
  return special === Special.Quantity ? '' : special === Special.IntOrString ? 0 : special === Special.StringList ? [] : {};
}

export function hasMagic(b: Uint8Array): boolean {
  return b.length >= 4 && b[0] === MAGIC[0] && b[1] === MAGIC[1] && b[2] === MAGIC[2] && b[3] === MAGIC[3];
}
