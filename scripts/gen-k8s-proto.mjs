#!/usr/bin/env node
// Vendors what the embedded API server needs to speak
// `application/vnd.kubernetes.protobuf` from the upstream protobufjs
// descriptor (a protobufjs JSON descriptor of the Kubernetes API types, built
// as PROVENANCE.md next to the output says; give its path), for @bufbuild/protobuf to read at run time:
// - k8s.descriptorset.json: a google.protobuf.FileDescriptorSet (proto JSON)
//   of the messages reachable from the built-in kinds the server serves, one
//   file per proto package, each field's json_name set to its Go JSON name;
// - k8s-kinds.generated.ts: what the descriptor cannot say (the kinds and
//   Go's inline struct embeddings).
// Both are committed, so a fresh clone needs nothing from outside; re-run
// this only when the served kinds change:
//
//   node scripts/gen-k8s-proto.mjs path/to/descriptor.json
//
// test/apiserver/protobuf.test.ts fails when a served built-in kind has no
// message here (i.e. when this list and the registry drift apart).
import { readFileSync, writeFileSync } from 'node:fs';
import { create, toJson } from '@bufbuild/protobuf';
import { FileDescriptorSetSchema } from '@bufbuild/protobuf/wkt';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const input = process.argv[2];
if (input === undefined) {
  process.stderr.write('usage: node scripts/gen-k8s-proto.mjs path/to/descriptor.json (see packages/devcluster/src/apiserver/protobuf/PROVENANCE.md for how it is built)\n');
  process.exit(2);
}
const outDir = `${root}packages/devcluster/src/apiserver/protobuf/`;

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
 * protobuf tag name: `Webhooks`, `Name`, `Expression` are "webhooks",
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

const SCALARS = { string: 9, int32: 5, int64: 3, bool: 8, bytes: 12 }; // FieldDescriptorProto.Type
const LABEL_OPTIONAL = 1;
const LABEL_REPEATED = 3;
const TYPE_MESSAGE = 11;

const descriptor = JSON.parse(readFileSync(input, 'utf8'));
const messages = new Map();
(function walk(node, prefix) {
  for (const [k, v] of Object.entries(node.nested ?? {})) {
    const name = prefix ? `${prefix}.${k}` : k;
    if (v.fields) messages.set(name, v);
    walk(v, name);
  }
})(descriptor, '');

const pkgOf = (full) => full.slice(0, full.lastIndexOf('.'));
const short = (full) => full.replace(/^k8s\.io\.api\./, '').replace(/^k8s\.io\.apimachinery\.pkg\./, '');

/** Type references are fully qualified (leading dot) or relative to the message's package. */
function resolve(from, type) {
  if (type in SCALARS) return type;
  const full = type.startsWith('.') ? type.slice(1) : `${pkgOf(from)}.${type}`;
  if (!messages.has(full)) throw new Error(`${from}: unknown type ${type}`);
  return full;
}

const kinds = {};
const wanted = [];
const want = (apiVersion, kind, full) => {
  if (!messages.has(full)) throw new Error(`no message ${full} in the descriptor`);
  kinds[`${apiVersion}/${kind}`] = short(full);
  wanted.push(full);
};
for (const [apiVersion, list, pkg] of ROOTS) {
  for (const kind of list) for (const k of [kind, `${kind}List`]) want(apiVersion, k, `${pkg}.${k}`);
}
for (const [apiVersion, kind, full] of EXTRA) want(apiVersion, kind, full);
// The envelope of every body.
wanted.push('k8s.io.apimachinery.pkg.runtime.Unknown');

/** package -> { messages: DescriptorProto[], deps: Set<package> } */
const files = new Map();
const seen = new Set();
while (wanted.length > 0) {
  const full = wanted.pop();
  if (seen.has(full)) continue;
  seen.add(full);
  const pkg = pkgOf(full);
  const file = files.get(pkg) ?? { messages: [], deps: new Set() };
  files.set(pkg, file);
  const field = [];
  const nestedType = [];
  const entries = Object.entries(messages.get(full).fields).sort((a, b) => a[1].id - b[1].id);
  for (const [name, f] of entries) {
    const type = resolve(full, f.type);
    const scalar = SCALARS[type];
    if (scalar === undefined) {
      wanted.push(type);
      if (pkgOf(type) !== pkg) file.deps.add(pkgOf(type));
    }
    const row = { name, number: f.id, jsonName: jsonName(full, name) };
    if (f.keyType !== undefined) {
      if (f.keyType !== 'string') throw new Error(`${full}.${name}: map key ${f.keyType}`);
      // A map is a repeated nested XEntry {key = 1, value = 2} marked map_entry, as protoc writes it.
      const entryName = `${name[0].toUpperCase()}${name.slice(1)}Entry`;
      const value = scalar === undefined ? { type: TYPE_MESSAGE, typeName: `.${type}` } : { type: scalar };
      nestedType.push({ name: entryName, field: [
        { name: 'key', number: 1, label: LABEL_OPTIONAL, type: SCALARS.string, jsonName: 'key' },
        { name: 'value', number: 2, label: LABEL_OPTIONAL, ...value, jsonName: 'value' },
      ], options: { mapEntry: true } });
      field.push({ ...row, label: LABEL_REPEATED, type: TYPE_MESSAGE, typeName: `.${full}.${entryName}` });
    } else {
      const label = f.rule === 'repeated' ? LABEL_REPEATED : LABEL_OPTIONAL;
      field.push({ ...row, label, ...(scalar === undefined ? { type: TYPE_MESSAGE, typeName: `.${type}` } : { type: scalar }) });
    }
  }
  file.messages.push({ name: full.slice(pkg.length + 1), field, nestedType });
}
for (const key of INLINE) {
  const message = key.slice(0, key.lastIndexOf('.'));
  if (!seen.has(message)) continue;
  const field = key.slice(message.length + 1);
  if (!(field in messages.get(message).fields)) throw new Error(`inline field ${key} not found`);
}

// Files in dependency order (a FileDescriptorSet lists a file after its imports).
const fileName = (pkg) => `${pkg.replace(/^k8s\.io\.api\./, 'k8s.io/api/').replace(/^k8s\.io\.apimachinery\./, 'k8s.io/apimachinery/').replaceAll('.', '/').replace(/^k8s\/io\//, 'k8s.io/')}/generated.proto`;
const ordered = [];
const visit = (pkg, path = []) => {
  if (ordered.includes(pkg)) return;
  if (path.includes(pkg)) throw new Error(`import cycle ${[...path, pkg].join(' -> ')}`);
  for (const dep of [...files.get(pkg).deps].sort()) visit(dep, [...path, pkg]);
  ordered.push(pkg);
};
for (const pkg of [...files.keys()].sort()) visit(pkg);

const goPackage = (pkg) => {
  let node = descriptor;
  for (const part of pkg.split('.')) node = node.nested[part];
  return node.options?.go_package;
};
const set = create(FileDescriptorSetSchema, {
  file: ordered.map((pkg) => ({
    name: fileName(pkg),
    package: pkg,
    dependency: [...files.get(pkg).deps].sort().map(fileName),
    messageType: files.get(pkg).messages.sort((a, b) => a.name.localeCompare(b.name)),
    options: { goPackage: goPackage(pkg) },
    syntax: 'proto2',
  })),
});
// One message per line: reviewable diffs without a 20,000-line file.
const json = toJson(FileDescriptorSetSchema, set);
const text = `{"file": [\n${json.file.map((f) => {
  const { messageType, ...rest } = f;
  return `${JSON.stringify(rest).slice(0, -1)}, "messageType": [\n${messageType.map((m) => `  ${JSON.stringify(m)}`).join(',\n')}\n]}`;
}).join(',\n')}\n]}\n`;
JSON.parse(text);
writeFileSync(`${outDir}k8s.descriptorset.json`, text);

const inline = [...INLINE].filter((k) => seen.has(k.slice(0, k.lastIndexOf('.')))).map(short).sort();
writeFileSync(`${outDir}k8s-kinds.generated.ts`, `// GENERATED by scripts/gen-k8s-proto.mjs (with k8s.descriptorset.json, from the
// Kubernetes protobuf descriptor; see PROVENANCE.md). Do not edit; re-run the script.
// What the descriptor cannot say; names drop "k8s.io.api." and "k8s.io.apimachinery.pkg.".
//
// KINDS: "apiVersion/kind" -> message ("*" = any built-in group version).
export const KINDS: Readonly<Record<string, string>> = ${JSON.stringify(kinds, null, 2)};

/** message.field of Go structs embedded with \`json:",inline"\`: a field of its own on the wire, its fields in the parent's JSON. */
export const INLINE: ReadonlySet<string> = new Set(${JSON.stringify(inline, null, 2)});
`);
console.log(`wrote ${outDir}: ${seen.size} messages in ${ordered.length} files, ${Object.keys(kinds).length} kinds`);
