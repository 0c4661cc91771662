// Issue 9, item 4: a 10 MB rule file cost over 1 GB of memory before
// `portal serve` / `portal test` rejected it. Rule file sizes are now checked
// before anything is parsed. Each command runs with a 256 MiB heap: parsing
// the file (the old behaviour) crashes such a process; checking its size
// first reports it and exits 2.
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { loadRulesFromDirectory, RULE_FILE_LIMITS } from '../../src/sources/rule-files.ts';
import { runPortal as run } from '../cli-test/run-portal.ts';
import { assertReported, type RunResult } from './portal.ts';

const HEAP = { NODE_OPTIONS: '--max-old-space-size=256', POD_NAME: 'portal-robust' };

let dir: string;
const at = (...p: string[]): string => join(dir, ...p);

/** ~`bytes` of valid YAML: many small PortalClusterRules, the costliest shape to parse. */
function manyRules(bytes: number, prefix: string): string {
  const one = (i: number): string =>
    `apiVersion: portal.dev/v1alpha1\nkind: PortalClusterRule\nmetadata: {name: ${prefix}-${i}}\nspec:\n  match: {kinds: [{apiGroups: [""], kinds: [Pod]}]}\n  validate: {schema: {properties: {metadata: {properties: {name: {pattern: "^[a-z]+$"}}}}}}\n---\n`;
  const parts: string[] = [];
  let size = 0;
  for (let i = 0; size < bytes; i++) {
    const doc = one(i);
    parts.push(doc);
    size += doc.length;
  }
  return parts.join('');
}

before(() => {
  dir = mkdtempSync(join(tmpdir(), 'portal-rule-size-'));
  mkdirSync(at('big'));
  writeFileSync(at('big', 'rules.yaml'), manyRules(10 * 1000 * 1000, 'r'));
  mkdirSync(at('many'));
  for (let i = 0; i < 20; i++) writeFileSync(at('many', `r${i}.yaml`), manyRules(900 * 1024, `f${i}`));
  writeFileSync(
    at('pod.yaml'),
    'apiVersion: v1\nkind: Pod\nmetadata: {name: web, namespace: default}\nspec: {containers: [{name: app, image: nginx}]}\n',
  );
});
after(() => rmSync(dir, { recursive: true, force: true }));

function portal(args: string[]): Promise<RunResult> {
  return run(args, { cwd: dir, env: HEAP });
}

describe('rule file sizes are checked before parsing', { concurrency: 3 }, () => {
  it('portal test: a 10 MB rule file is reported, exit 2, no heap exhaustion', async () => {
    assertReported(await portal(['test', '--policies', 'big', 'pod.yaml']), 2, /big\/rules\.yaml: file is 9\.5 MiB, over the 1\.0 MiB limit for a rule file; split it into smaller files/);
  });

  it('portal serve --policies: the same, before anything listens', async () => {
    assertReported(
      await portal(['serve', '--policies', 'big', '--self-signed', '--webhook-port', '0', '--probes-port', '0', '--bind-address', '127.0.0.1']),
      2,
      /big\/rules\.yaml: file is 9\.5 MiB, over the 1\.0 MiB limit for a rule file/,
    );
  });

  it('portal dev --policies: the same, before the API server starts', async () => {
    assertReported(await portal(['dev', '--policies', 'big']), 2, /rules\.yaml: file is 9\.5 MiB, over the 1\.0 MiB limit for a rule file/);
  });

  it('a rule directory over the total limit is refused as a whole, nothing read', async () => {
    const r = await loadRulesFromDirectory(at('many'));
    assert.deepEqual(r.rules, []);
    assert.equal(r.errors.length, 1);
    assert.match(r.errors[0]?.message ?? '', /^20 files hold 17\.6 MiB, over the 16\.0 MiB limit for all rule files together; nothing was read/);
    assert.equal(RULE_FILE_LIMITS.maxFileBytes, 1024 * 1024);
  });
});
