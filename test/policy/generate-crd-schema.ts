/**
 * Regenerates src/policy/crd-schema.generated.ts and
 * src/policy/exception-crd-schema.generated.ts from the CRD manifests, the
 * single source of truth (src/policy does no file I/O, so it embeds a copy).
 * Run: node --import tsx test/policy/generate-crd-schema.ts
 * test/policy/crd.test.ts fails when the copies and the manifests drift apart.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { parse } from 'yaml';

const root = fileURLToPath(new URL('../..', import.meta.url));
export const CRD_FILES = {
  PortalRule: `${root}charts/portal/crds/portal.dev_portalrules.yaml`,
  PortalClusterRule: `${root}charts/portal/crds/portal.dev_portalclusterrules.yaml`,
} as const;
export const EXCEPTION_CRD_FILE = `${root}charts/portal/crds/portal.dev_portalexceptions.yaml`;
export const GENERATED_FILE = `${root}src/policy/crd-schema.generated.ts`;
export const EXCEPTION_GENERATED_FILE = `${root}src/policy/exception-crd-schema.generated.ts`;

export function crdSchema(file: string): unknown {
  const crd = parse(readFileSync(file, 'utf8')) as {
    spec: { versions: { name: string; schema: { openAPIV3Schema: unknown } }[] };
  };
  const version = crd.spec.versions.find((v) => v.name === 'v1alpha1');
  if (!version) throw new Error(`${file}: no v1alpha1 version`);
  return version.schema.openAPIV3Schema;
}

export function renderGenerated(): string {
  const schema = crdSchema(CRD_FILES.PortalClusterRule);
  return [
    '// GENERATED from charts/portal/crds/portal.dev_portalclusterrules.yaml by',
    '// `node --import tsx test/policy/generate-crd-schema.ts`. Do not edit by hand:',
    '// edit the CRD manifest and regenerate.',
    '',
    '/** The openAPIV3Schema of PortalRule and PortalClusterRule (identical). */',
    `export const RULE_CRD_OPENAPI_SCHEMA: Readonly<Record<string, unknown>> = ${JSON.stringify(schema, null, 2)};`,
    '',
  ].join('\n');
}

export function renderExceptionGenerated(): string {
  const schema = crdSchema(EXCEPTION_CRD_FILE);
  return [
    '// GENERATED from charts/portal/crds/portal.dev_portalexceptions.yaml by',
    '// `node --import tsx test/policy/generate-crd-schema.ts`. Do not edit by hand:',
    '// edit the CRD manifest and regenerate.',
    '',
    '/** The openAPIV3Schema of PortalException. */',
    `export const EXCEPTION_CRD_OPENAPI_SCHEMA: Readonly<Record<string, unknown>> = ${JSON.stringify(schema, null, 2)};`,
    '',
  ].join('\n');
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  writeFileSync(GENERATED_FILE, renderGenerated());
  writeFileSync(EXCEPTION_GENERATED_FILE, renderExceptionGenerated());
  console.log(`wrote ${GENERATED_FILE} and ${EXCEPTION_GENERATED_FILE}`);
}
