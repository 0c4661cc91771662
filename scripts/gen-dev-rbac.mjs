/**
 * Writes packages/devcluster/src/dev/chart-rbac.generated.ts: the chart's RBAC as
 * `helm template` renders it with the default values, and with
 * `denials.events=true` (for `portal dev --denial-events`; see chart-rbac.ts).
 * Run: node --import tsx scripts/gen-dev-rbac.mjs (tsx: it imports the TypeScript helpers)
 */
import { writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { render } from '../test/chart/helm.ts';
import { DENIAL_EVENTS_SET, generatedModule, selectRbac } from '../packages/devcluster/src/dev/chart-rbac-render.ts';

const out = fileURLToPath(new URL('../packages/devcluster/src/dev/chart-rbac.generated.ts', import.meta.url));
writeFileSync(out, generatedModule(selectRbac(await render()), selectRbac(await render(undefined, [...DENIAL_EVENTS_SET]))));
process.stdout.write(`wrote ${out}\n`);
