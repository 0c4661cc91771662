/**
 * OpenAPI v3 component schemas of the built-in kinds, derived from the
 * committed protobuf field tables (protobuf/k8s-types.generated.ts, itself
 * generated from the shared Kubernetes descriptor): one schema per message,
 * named as kube-openapi names them (`io.k8s.api.core.v1.Pod`). The
 * descriptor carries no comments, so schemas have no descriptions. List and
 * map semantics (`x-kubernetes-list-type`, merge keys) are not in the
 * descriptor either: they come from the table below, copied from the Go
 * struct tags of k8s.io/api for the lists server-side apply and strategic
 * merge treat specially; every other list is atomic, as in kube.
 */
import { KINDS, MESSAGES, type FieldRow } from '../protobuf/k8s-types.generated.ts';
import type { Obj } from '../types.ts';

/** `message.field` -> list-map keys (patch strategy merge with these keys). */
const LIST_MAPS: Readonly<Record<string, { keys: string[]; mergeKey: string }>> = (() => {
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
  for (const [msg, rows] of Object.entries(MESSAGES)) {
    for (const r of rows) if (r[0] === 'conditions' && r[3] === 1) out[`${msg}.conditions`] = { keys: ['type'], mergeKey: 'type' };
  }
  return out;
})();

/** Primitive lists that are sets (patch strategy merge). */
const LIST_SETS = new Set(['apis.meta.v1.ObjectMeta.finalizers']);

/** Structs that are atomic for server-side apply (`+structType=atomic`). */
const ATOMIC_STRUCTS = new Set(['apis.meta.v1.LabelSelector', 'core.v1.LocalObjectReference', 'core.v1.ObjectReference',
  'core.v1.NodeSelector', 'core.v1.ConfigMapKeySelector', 'core.v1.SecretKeySelector', 'core.v1.ObjectFieldSelector',
  'core.v1.ResourceFieldSelector', 'core.v1.TypedLocalObjectReference']);

/** Go []string types: their JSON is the array itself. */
const STRING_LISTS = new Set(Object.entries(MESSAGES).filter(([, rows]) => rows.length === 1 && rows[0]![0] === 'items' && rows[0]![3] === 1 && rows[0]![2] === 'string').map(([n]) => n));

const SCALARS: Readonly<Record<string, Obj>> = {
  string: { type: 'string' },
  bool: { type: 'boolean' },
  int32: { type: 'integer', format: 'int32' },
  int64: { type: 'integer', format: 'int64' },
  bytes: { type: 'string', format: 'byte' },
  double: { type: 'number', format: 'double' },
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

function typeSchema(type: string): Obj {
  const scalar = SCALARS[type];
  if (scalar) return { ...scalar };
  if (STRING_LISTS.has(type)) return { type: 'array', items: { type: 'string' } };
  return { $ref: `${REF_PREFIX}${componentName(type)}` };
}

function fieldSchema(message: string, row: FieldRow): Obj {
  const [name, , type, shape] = row;
  if (shape === 2) return { type: 'object', additionalProperties: typeSchema(type) };
  if (shape !== 1) return typeSchema(type);
  const s: Obj = { type: 'array', items: typeSchema(type) };
  const key = `${message}.${name}`;
  const map = LIST_MAPS[key];
  if (map) {
    Object.assign(s, { 'x-kubernetes-list-type': 'map', 'x-kubernetes-list-map-keys': map.keys,
      'x-kubernetes-patch-merge-key': map.mergeKey, 'x-kubernetes-patch-strategy': 'merge' });
  } else if (LIST_SETS.has(key)) {
    Object.assign(s, { 'x-kubernetes-list-type': 'set', 'x-kubernetes-patch-strategy': 'merge' });
  } else s['x-kubernetes-list-type'] = 'atomic';
  return s;
}

/** Messages embedded inline (Go struct embedding) contribute their fields to the parent. */
function collectProperties(message: string, props: Obj): void {
  for (const row of MESSAGES[message] ?? []) {
    if (row[3] === 3) collectProperties(row[2], props);
    else props[row[0]] = fieldSchema(message, row);
  }
}

function messageSchema(message: string): Obj {
  const special = SPECIAL[message];
  if (special) return { ...special };
  const properties: Obj = {};
  collectProperties(message, properties);
  const s: Obj = { type: 'object', properties };
  if (ATOMIC_STRUCTS.has(message)) s['x-kubernetes-map-type'] = 'atomic';
  return s;
}

let cache: Map<string, Obj> | undefined;

/** Every built-in component schema by name; kinds carry apiVersion, kind and x-kubernetes-group-version-kind. */
export function builtinComponents(): ReadonlyMap<string, Obj> {
  if (cache) return cache;
  const out = new Map<string, Obj>();
  for (const message of Object.keys(MESSAGES)) {
    if (STRING_LISTS.has(message)) continue;
    out.set(componentName(message), messageSchema(message));
  }
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
