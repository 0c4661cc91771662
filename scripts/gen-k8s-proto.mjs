#!/usr/bin/env node
// Derives what the embedded API server needs to speak
// `application/vnd.kubernetes.protobuf` from the upstream descriptor
// (../shared/kubernetes-proto/descriptor.json, see PROVENANCE.md next to the
// output): the messages reachable from the built-in kinds it serves, each as
// a compact field table. The output is committed, so a fresh clone needs
// nothing from outside; re-run this only when the served kinds change:
//
//   node scripts/gen-k8s-proto.mjs [path/to/descriptor.json]
//
// test/apiserver/protobuf.test.ts fails when a served built-in kind has no
// message here (i.e. when this list and the registry drift apart).
import { readFileSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const input = process.argv[2] ?? fileURLToPath(new URL('../../shared/kubernetes-proto/descriptor.json', import.meta.url));
const output = `${root}packages/devcluster/src/apiserver/protobuf/k8s-types.generated.ts`;

/** [apiVersion, kind, proto package]: every built-in kind the server serves, plus the API's own messages. */
const ROOTS = [
  ['v1', ['Namespace', 'Pod', 'ConfigMap', 'Secret', 'Service', 'ServiceAccount', 'Event', 'ReplicationController', 'Node'], 'k8s.io.api.core.v1'],
  ['events.k8s.io/v1', ['Event'], 'k8s.io.api.events.v1'],
  ['coordination.k8s.io/v1', ['Lease'], 'k8s.io.api.coordination.v1'],
  ['policy/v1', ['PodDisruptionBudget'], 'k8s.io.api.policy.v1'],
  ['apps/v1', ['Deployment', 'StatefulSet', 'DaemonSet', 'ReplicaSet', 'ControllerRevision'], 'k8s.io.api.apps.v1'],
  ['batch/v1', ['Job', 'CronJob'], 'k8s.io.api.batch.v1'],
  ['admissionregistration.k8s.io/v1', ['ValidatingWebhookConfiguration', 'MutatingWebhookConfiguration', 'ValidatingAdmissionPolicy', 'ValidatingAdmissionPolicyBinding'], 'k8s.io.api.admissionregistration.v1'],
  ['rbac.authorization.k8s.io/v1', ['Role', 'ClusterRole', 'RoleBinding', 'ClusterRoleBinding'], 'k8s.io.api.rbac.v1'],
  ['networking.k8s.io/v1', ['NetworkPolicy'], 'k8s.io.api.networking.v1'],
];
/** Bodies that are not stored objects: sent with their own kind, no List. */
const EXTRA = [
  ['policy/v1', 'Eviction', 'k8s.io.api.policy.v1.Eviction'],
  ['autoscaling/v1', 'Scale', 'k8s.io.api.autoscaling.v1.Scale'],
  ['authorization.k8s.io/v1', 'SelfSubjectAccessReview', 'k8s.io.api.authorization.v1.SelfSubjectAccessReview'],
  ['authorization.k8s.io/v1', 'SubjectAccessReview', 'k8s.io.api.authorization.v1.SubjectAccessReview'],
  ['authorization.k8s.io/v1', 'SelfSubjectRulesReview', 'k8s.io.api.authorization.v1.SelfSubjectRulesReview'],
  ['authentication.k8s.io/v1', 'SelfSubjectReview', 'k8s.io.api.authentication.v1.SelfSubjectReview'],
  ['authentication.k8s.io/v1', 'TokenReview', 'k8s.io.api.authentication.v1.TokenReview'],
  // meta.k8s.io/v1 kinds arrive under any group version (client-go registers them in each).
  ['*', 'Status', 'k8s.io.apimachinery.pkg.apis.meta.v1.Status'],
  ['*', 'DeleteOptions', 'k8s.io.apimachinery.pkg.apis.meta.v1.DeleteOptions'],
  ['*', 'WatchEvent', 'k8s.io.apimachinery.pkg.apis.meta.v1.WatchEvent'],
];

/**
 * The proto field name is the JSON name, except for a few Go fields without a
 * protobuf tag name: \`Webhooks\`, \`Name\`, \`Expression\` are "webhooks",
 * "name", "expression" in JSON, while DaemonEndpoint's JSON name really is
 * "Port" and FieldsV1.Raw is not a JSON field at all (the codec maps it).
 */
const KEEP_CASE = new Set(['k8s.io.api.core.v1.DaemonEndpoint.Port', 'k8s.io.apimachinery.pkg.apis.meta.v1.FieldsV1.Raw']);
const jsonName = (message, field) => (KEEP_CASE.has(`${message}.${field}`) || !/^[A-Z]/.test(field) ? field : field[0].toLowerCase() + field.slice(1));

/**
 * Go structs embedded with `json:",inline"`: on the wire a field of their own,
 * in JSON their fields sit in the parent object. (Read from the Go types;
 * the descriptor cannot tell.)
 */
const INLINE = new Set([
  'k8s.io.api.core.v1.Probe.handler',
  'k8s.io.api.core.v1.Volume.volumeSource',
  'k8s.io.api.core.v1.PersistentVolumeSpec.persistentVolumeSource',
  'k8s.io.api.core.v1.EphemeralContainer.ephemeralContainerCommon',
  ...['ConfigMapEnvSource', 'ConfigMapKeySelector', 'ConfigMapProjection', 'ConfigMapVolumeSource', 'SecretEnvSource', 'SecretKeySelector', 'SecretProjection']
    .map((m) => `k8s.io.api.core.v1.${m}.localObjectReference`),
  'k8s.io.api.admissionregistration.v1.NamedRuleWithOperations.ruleWithOperations',
  'k8s.io.api.admissionregistration.v1.RuleWithOperations.rule',
]);

const SCALARS = new Set(['string', 'int32', 'int64', 'bool', 'bytes']);
const PREFIXES = [['k8s.io.api.', ''], ['k8s.io.apimachinery.pkg.', '']];
const short = (full) => {
  for (const [p, r] of PREFIXES) if (full.startsWith(p)) return r + full.slice(p.length);
  throw new Error(`unexpected package of ${full}`);
};

const descriptor = JSON.parse(readFileSync(input, 'utf8'));
const messages = new Map();
(function walk(node, prefix) {
  for (const [k, v] of Object.entries(node.nested ?? {})) {
    const name = prefix ? `${prefix}.${k}` : k;
    if (v.fields) messages.set(name, v);
    walk(v, name);
  }
})(descriptor, '');

/** Type references are fully qualified (leading dot) or relative to the message's package. */
function resolve(from, type) {
  if (SCALARS.has(type)) return type;
  if (type.startsWith('.')) {
    if (!messages.has(type.slice(1))) throw new Error(`${from}: unknown type ${type}`);
    return type.slice(1);
  }
  const pkg = from.slice(0, from.lastIndexOf('.'));
  const full = `${pkg}.${type}`;
  if (!messages.has(full)) throw new Error(`${from}: cannot resolve ${type}`);
  return full;
}

const kinds = {};
const wanted = [];
for (const [apiVersion, list, pkg] of ROOTS) {
  for (const kind of list) {
    for (const k of [kind, `${kind}List`]) {
      const full = `${pkg}.${k}`;
      if (!messages.has(full)) throw new Error(`no message ${full} in the descriptor`);
      kinds[`${apiVersion}/${k}`] = short(full);
      wanted.push(full);
    }
  }
}
for (const [apiVersion, kind, full] of EXTRA) {
  if (!messages.has(full)) throw new Error(`no message ${full} in the descriptor`);
  kinds[`${apiVersion}/${kind}`] = short(full);
  wanted.push(full);
}

const tables = {};
const seen = new Set();
while (wanted.length > 0) {
  const full = wanted.pop();
  if (seen.has(full)) continue;
  seen.add(full);
  const rows = [];
  const fields = Object.entries(messages.get(full).fields).sort((a, b) => a[1].id - b[1].id);
  for (const [name, f] of fields) {
    const type = resolve(full, f.type);
    if (!SCALARS.has(type)) wanted.push(type);
    if (f.keyType !== undefined && f.keyType !== 'string') throw new Error(`${full}.${name}: map key ${f.keyType}`);
    // 0 optional, 1 repeated, 2 map<string, type>, 3 inline (embedded Go struct)
    const shape = f.keyType !== undefined ? 2 : f.rule === 'repeated' ? 1 : INLINE.has(`${full}.${name}`) ? 3 : 0;
    rows.push([jsonName(full, name), f.id, SCALARS.has(type) ? type : short(type), shape]);
  }
  tables[short(full)] = rows;
}
for (const key of INLINE) {
  const message = key.slice(0, key.lastIndexOf('.'));
  if (seen.has(message) && !tables[short(message)].some((r) => r[3] === 3)) throw new Error(`inline field ${key} not found`);
}

const sorted = Object.fromEntries(Object.entries(tables).sort(([a], [b]) => a.localeCompare(b)));
const text = `// GENERATED by scripts/gen-k8s-proto.mjs from the Kubernetes protobuf descriptor
// (kubernetes/api @ 10b39a39, kubernetes/apimachinery @ eed236ce; Apache-2.0,
// see PROVENANCE.md in this directory). Do not edit; re-run the script.
//
// MESSAGES: message -> fields [jsonName, fieldNumber, type, shape], shape
// 0 optional, 1 repeated, 2 map<string, type>, 3 inline (an embedded Go
// struct: its own field on the wire, its fields in the parent's JSON). Names drop the prefixes
// "k8s.io.api." and "k8s.io.apimachinery.pkg.".
// KINDS: "apiVersion/kind" -> message ("*" = any built-in group version).
export type FieldRow = readonly [name: string, id: number, type: string, shape: 0 | 1 | 2 | 3];

export const KINDS: Readonly<Record<string, string>> = ${JSON.stringify(kinds, null, 2)};

export const MESSAGES: Readonly<Record<string, readonly FieldRow[]>> = {
${Object.entries(sorted).map(([name, rows]) => `  ${JSON.stringify(name)}: [${rows.map((r) => JSON.stringify(r)).join(', ')}],`).join('\n')}
};
`;
writeFileSync(output, text);
console.log(`wrote ${output}: ${Object.keys(sorted).length} messages, ${Object.keys(kinds).length} kinds`);
