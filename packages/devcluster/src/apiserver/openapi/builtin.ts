/**
 * OpenAPI v3 component schemas of the built-in kinds, derived from the
 * vendored protobuf descriptors (protobuf/descriptors.ts, generated from the
 * shared Kubernetes descriptor): one schema per message,
 * named as kube-openapi names them (`io.k8s.api.core.v1.Pod`). The
 * descriptor carries no comments, so schemas have no descriptions. List and
 * map semantics (`x-kubernetes-list-type`, merge keys) are not in the
 * descriptor either: they come from the table below, copied from the Go
 * struct tags of k8s.io/api for the lists server-side apply and strategic
 * merge treat specially; every other list is atomic, as in kube.
 */
import { ScalarType, type DescField, type DescMessage } from '@bufbuild/protobuf';
import { allMessages, shortName } from '../protobuf/descriptors.ts';
import { INLINE, KINDS } from '../protobuf/k8s-kinds.generated.ts';
import type { Obj } from '../types.ts';

/** `message.field` -> list-map keys (patch strategy merge with these keys); built with the schemas, on first use. */
function listMaps(messages: readonly DescMessage[]): Readonly<Record<string, { keys: string[]; mergeKey: string }>> {
  const out: Record<string, { keys: string[]; mergeKey: string }> = {};
  const add = (fields: string[], keys: string[], mergeKey = keys[0]!): void => {
    for (const f of fields) out[f] = { keys, mergeKey };
  };
  add(['core.v1.PodSpec.containers', 'core.v1.PodSpec.initContainers', 'core.v1.PodSpec.ephemeralContainers', 'core.v1.PodSpec.volumes',
    'core.v1.PodSpec.imagePullSecrets', 'core.v1.PodSpec.resourceClaims', 'core.v1.PodSpec.schedulingGates',
    'core.v1.Container.env', 'core.v1.EphemeralContainerCommon.env', 'core.v1.ServiceAccount.secrets',
    'admissionregistration.v1.ValidatingWebhookConfiguration.webhooks', 'admissionregistration.v1.MutatingWebhookConfiguration.webhooks'], ['name']);
  add(['core.v1.Container.ports', 'core.v1.EphemeralContainerCommon.ports'], ['containerPort', 'protocol']);
  add(['core.v1.ServiceSpec.ports'], ['port', 'protocol']);
  add(['core.v1.Container.volumeMounts', 'core.v1.EphemeralContainerCommon.volumeMounts'], ['mountPath']);
  add(['core.v1.Container.volumeDevices', 'core.v1.EphemeralContainerCommon.volumeDevices'], ['devicePath']);
  add(['core.v1.PodSpec.hostAliases'], ['ip']);
  add(['core.v1.PodSpec.topologySpreadConstraints'], ['topologyKey', 'whenUnsatisfiable'], 'topologyKey');
  add(['apis.meta.v1.ObjectMeta.ownerReferences'], ['uid']);
  for (const m of messages) {
    for (const f of m.fields) if (f.jsonName === 'conditions' && f.fieldKind === 'list') out[`${shortName(m)}.conditions`] = { keys: ['type'], mergeKey: 'type' };
  }
  return out;
}

/** Primitive lists that are sets (patch strategy merge). */
const LIST_SETS = new Set(['apis.meta.v1.ObjectMeta.finalizers']);

/** Structs that are atomic for server-side apply (`+structType=atomic`). */
const ATOMIC_STRUCTS = new Set(['apis.meta.v1.LabelSelector', 'core.v1.LocalObjectReference', 'core.v1.ObjectReference',
  'core.v1.NodeSelector', 'core.v1.ConfigMapKeySelector', 'core.v1.SecretKeySelector', 'core.v1.ObjectFieldSelector',
  'core.v1.ResourceFieldSelector', 'core.v1.TypedLocalObjectReference']);

/** Go []string types (a single repeated string `items`): their JSON is the array itself. */
function isStringList(m: DescMessage): boolean {
  const only = m.fields.length === 1 ? m.fields[0]! : undefined;
  return only?.name === 'items' && only.fieldKind === 'list' && only.scalar === ScalarType.STRING;
}

/** The protobuf runtime's own envelope, not an API type. */
const ENVELOPE = new Set(['runtime.Unknown', 'runtime.TypeMeta']);

const SCALARS: Readonly<Partial<Record<ScalarType, Obj>>> = {
  [ScalarType.STRING]: { type: 'string' },
  [ScalarType.BOOL]: { type: 'boolean' },
  [ScalarType.INT32]: { type: 'integer', format: 'int32' },
  [ScalarType.INT64]: { type: 'integer', format: 'int64' },
  [ScalarType.BYTES]: { type: 'string', format: 'byte' },
  [ScalarType.DOUBLE]: { type: 'number', format: 'double' },
};

/** Messages with a JSON form of their own (not their protobuf fields). */
const SPECIAL: Readonly<Record<string, Obj>> = {
  'apis.meta.v1.Time': { type: 'string', format: 'date-time' },
  'apis.meta.v1.MicroTime': { type: 'string', format: 'date-time' },
  'api.resource.Quantity': { type: 'string' },
  'util.intstr.IntOrString': { type: 'string', format: 'int-or-string', 'x-kubernetes-int-or-string': true },
  'runtime.RawExtension': { type: 'object', 'x-kubernetes-preserve-unknown-fields': true },
  'apis.meta.v1.FieldsV1': { type: 'object', 'x-kubernetes-preserve-unknown-fields': true },
};

/** `core.v1.Pod` -> `io.k8s.api.core.v1.Pod`, `apis.meta.v1.ObjectMeta` -> `io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta`. */
export function componentName(message: string): string {
  return /^(apis|api|util|runtime)\./.test(message) ? `io.k8s.apimachinery.pkg.${message}` : `io.k8s.api.${message}`;
}

export const REF_PREFIX = '#/components/schemas/';

/** The schema of a field's value (of one item for a list, of one value for a map). */
function typeSchema(field: DescField): Obj {
  if (field.message) return isStringList(field.message) ? { type: 'array', items: { type: 'string' } } : { $ref: `${REF_PREFIX}${componentName(shortName(field.message))}` };
  return { ...SCALARS[field.scalar!] };
}

function fieldSchema(message: string, field: DescField, lists: ReturnType<typeof listMaps>): Obj {
  if (field.fieldKind === 'map') return { type: 'object', additionalProperties: typeSchema(field) };
  if (field.fieldKind !== 'list') return typeSchema(field);
  const s: Obj = { type: 'array', items: typeSchema(field) };
  const key = `${message}.${field.jsonName}`;
  const map = lists[key];
  if (map) {
    Object.assign(s, { 'x-kubernetes-list-type': 'map', 'x-kubernetes-list-map-keys': map.keys,
      'x-kubernetes-patch-merge-key': map.mergeKey, 'x-kubernetes-patch-strategy': 'merge' });
  } else if (LIST_SETS.has(key)) {
    Object.assign(s, { 'x-kubernetes-list-type': 'set', 'x-kubernetes-patch-strategy': 'merge' });
  } else s['x-kubernetes-list-type'] = 'atomic';
  return s;
}

/** Messages embedded inline (Go struct embedding) contribute their fields to the parent. */
function collectProperties(desc: DescMessage, props: Obj, lists: ReturnType<typeof listMaps>): void {
  const message = shortName(desc);
  for (const field of desc.fields) {
    if (INLINE.has(`${message}.${field.name}`)) collectProperties(field.message!, props, lists);
    else props[field.jsonName] = fieldSchema(message, field, lists);
  }
}

function messageSchema(desc: DescMessage, lists: ReturnType<typeof listMaps>): Obj {
  const message = shortName(desc);
  const special = SPECIAL[message];
  if (special) return { ...special };
  const properties: Obj = {};
  collectProperties(desc, properties, lists);
  const s: Obj = { type: 'object', properties };
  if (ATOMIC_STRUCTS.has(message)) s['x-kubernetes-map-type'] = 'atomic';
  return s;
}

let cache: Map<string, Obj> | undefined;

/** Every built-in component schema by name; kinds carry apiVersion, kind and x-kubernetes-group-version-kind. */
export function builtinComponents(): ReadonlyMap<string, Obj> {
  if (cache) return cache;
  const out = new Map<string, Obj>();
  const messages = allMessages().filter((m) => !isStringList(m) && !ENVELOPE.has(shortName(m)));
  const lists = listMaps(messages);
  for (const desc of messages.sort((a, b) => shortName(a).localeCompare(shortName(b)))) out.set(componentName(shortName(desc)), messageSchema(desc, lists));
  for (const [gvk, message] of Object.entries(KINDS)) {
    const i = gvk.lastIndexOf('/');
    const gv = gvk.slice(0, i);
    const kind = gvk.slice(i + 1);
    const s = out.get(componentName(message));
    if (!s) continue;
    const props = s['properties'] as Obj;
    props['apiVersion'] = { type: 'string' };
    props['kind'] = { type: 'string' };
    const slash = gv.indexOf('/');
    const gvks = (s['x-kubernetes-group-version-kind'] ??= []) as Obj[];
    if (gv === '*') {
      // meta/v1 types (Status, DeleteOptions, WatchEvent) are served in every group version.
      gvks.push({ group: '', version: 'v1', kind });
    } else gvks.push({ group: slash < 0 ? '' : gv.slice(0, slash), version: slash < 0 ? gv : gv.slice(slash + 1), kind });
  }
  cache = out;
  return out;
}

/** Component name of a built-in kind, if it has a schema. */
export function builtinKindComponent(apiVersion: string, kind: string): string | undefined {
  const message = KINDS[`${apiVersion}/${kind}`];
  return message ? componentName(message) : undefined;
}
