/**
 * Hostile input to `portal test` suites (issue 17): paths outside the suite's
 * directory (allowed, bounded), symbolic link loops and deep or wide trees
 * (the walks end), FIFOs and oversized files named like suites, alias bombs
 * and deep nesting in the suite YAML. Each ends with a clear message and exit
 * 2 (or runs), never a hang or a stack trace.
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdir, symlink } from 'node:fs/promises';
import { join } from 'node:path';
import { before, describe, it } from 'node:test';
import { readManifests } from '../../src/config/manifests.ts';
import { discoverSuites } from '../../src/cli/test-suite/discover.ts';
import { runPortal, type RunResult } from '../cli-test/run-portal.ts';
import { tempDir } from '../support/temp-dir.ts';

const tmp = tempDir('portal-suites-hostile-');
const write = tmp.write;

const RULE = `apiVersion: portal.dev/v1alpha1
kind: PortalClusterRule
metadata: {name: no-host-network}
spec:
  match:
    kinds: [{apiGroups: [""], kinds: [Pod]}]
  validate:
    schema: {properties: {spec: {properties: {hostNetwork: {const: false}}}}}
`;
const POD = 'apiVersion: v1\nkind: Pod\nmetadata: {name: web}\nspec:\n  hostNetwork: true\n  containers: [{name: a, image: nginx}]\n';

function suite(policies: string, resources: string): string {
  return `apiVersion: cli.portal.dev/v1alpha1
kind: Test
policies: [${policies}]
resources: [${resources}]
results:
  - {rule: no-host-network, kind: Pod, resources: [web], result: fail}
`;
}

function noStack(r: RunResult): void {
  assert.doesNotMatch(r.stderr + r.stdout, /\n\s+at .+:\d+:\d+\)?\n/, `stack trace shown:\n${r.stderr}`);
}

// The fixtures above, in place before the tests run.
before(async () => {
  await write('elsewhere/rules/no-host-network.yaml', RULE);
  await write('elsewhere/manifests/pod.yaml', POD);
});

void describe('hostile suites', { concurrency: 3 }, () => {
  void it('paths outside the suite directory, relative and absolute, are read like any other', async () => {
    const rel = await write('a/b/c/outside.portal-test.yaml', suite('../../../elsewhere/rules', `${join(tmp.path, 'elsewhere', 'manifests')}`));
    const r = await runPortal(['test', rel], { cwd: tmp.path });
    assert.equal(r.code, 0, r.stdout + r.stderr);
    assert.match(r.stdout, /1 expectation: 1 held/);
  });

  void it('symbolic link loops and a deep tree: discovery ends, a looping suite link is named', async () => {
    // tree/loop → tree (a directory loop, not followed); 200 levels deep with the suite at the bottom.
    let deep = 'tree';
    for (let i = 0; i < 200; i++) deep = join(deep, `d${i}`);
    const depth = '../'.repeat(201);
    await write(join(deep, 'deep.portal-test.yaml'), suite(`${depth}elsewhere/rules`, `${depth}elsewhere/manifests`));
    await symlink(join(tmp.path, 'tree'), join(tmp.path, 'tree', 'loop'));
    await symlink(join(tmp.path, 'tree', 'd0'), join(tmp.path, 'tree', 'd0', 'back'));
    // Two links naming each other, named like a suite: read, and refused with ELOOP.
    await symlink(join(tmp.path, 'tree', 'y.portal-test.yaml'), join(tmp.path, 'tree', 'x.portal-test.yaml'));
    await symlink(join(tmp.path, 'tree', 'x.portal-test.yaml'), join(tmp.path, 'tree', 'y.portal-test.yaml'));
    const r = await runPortal(['test', 'tree'], { cwd: tmp.path });
    assert.equal(r.code, 2, r.stdout + r.stderr);
    assert.match(r.stdout, /^PASS tree\/d0\/.*\/d199\/deep\.portal-test\.yaml \(1 expectation\)$/m);
    assert.match(r.stderr, /tree\/x\.portal-test\.yaml: cannot read: too many levels of symbolic links/);
    noStack(r);
    // The resources entry pointing into the looping tree is read once, links not followed.
    const looped = await write('looped.portal-test.yaml', suite('elsewhere/rules', 'tree/d0'));
    const l = await runPortal(['test', looped], { cwd: tmp.path });
    assert.equal(l.code, 2, l.stdout + l.stderr);
    assert.match(l.stderr, /looped\.portal-test\.yaml:4:13: resources\[0\]: tree\/d0: directory holds no \.yaml, \.yml or \.json files/);
    noStack(l);
  });

  void it('a FIFO named like a suite is refused without blocking; so is an oversized suite', async () => {
    await mkdir(join(tmp.path, 'special'), { recursive: true });
    execFileSync('mkfifo', [join(tmp.path, 'special', 'pipe.portal-test.yaml')]);
    await write('special/huge.portal-test.yaml', `${suite('../elsewhere/rules', '../elsewhere/manifests')}# ${'x'.repeat(1024 * 1024)}\n`);
    const r = await runPortal(['test', 'special'], { cwd: tmp.path });
    assert.equal(r.code, 2, r.stdout + r.stderr);
    assert.match(r.stderr, /special\/pipe\.portal-test\.yaml: is a FIFO \(named pipe\); only regular files are read/);
    assert.match(r.stderr, /special\/huge\.portal-test\.yaml: file is 1\.0 MiB, over the 1\.0 MiB limit for a suite/);
    noStack(r);
  });

  void it('an alias bomb and deep nesting in the suite YAML are bad input', async () => {
    const lol = ['a: &a [x, x, x, x, x, x, x, x, x, x]'];
    for (let i = 1; i < 9; i++) lol.push(`${String.fromCharCode(97 + i)}: &${String.fromCharCode(97 + i)} [${Array(10).fill(`*${String.fromCharCode(96 + i)}`).join(', ')}]`);
    await write('yaml/bomb.portal-test.yaml', `${suite('../elsewhere/rules', '../elsewhere/manifests')}metadata:\n  labels:\n${lol.map((l) => `    ${l}`).join('\n')}\n`);
    await write('yaml/deep.portal-test.yaml', `${suite('../elsewhere/rules', '../elsewhere/manifests')}metadata: ${'['.repeat(20000)}${']'.repeat(20000)}\n`);
    const r = await runPortal(['test', 'yaml'], { cwd: tmp.path });
    assert.equal(r.code, 2, r.stdout + r.stderr);
    assert.match(r.stderr, /yaml\/bomb\.portal-test\.yaml: invalid YAML: Excessive alias count/);
    assert.match(r.stderr, /yaml\/deep\.portal-test\.yaml: nested deeper than 200 levels at line \d+/);
    noStack(r);
  });

  void it('a wide tree: discovery and manifest walks stop with an error after their entry budget', async () => {
    for (let i = 0; i < 60; i++) await write(`wide/d${i}/m${i}.yaml`, POD.replace('web', `web${i}`));
    const found = await discoverSuites([join(tmp.path, 'wide')], 50);
    assert.deepEqual(found.files, []);
    assert.match(found.problems.join('\n'), /wide: more than 50 directory entries searched for suites; name the directories that hold them/);
    const read = await readManifests([join(tmp.path, 'wide')], { maxFileBytes: 1024 * 1024, maxTotalBytes: Infinity, what: 'manifest', maxEntries: 50 });
    assert.deepEqual(read.documents, []);
    assert.match(read.errors.map((e) => e.message).join('\n'), /holds more than 50 files and directories; name the directories that hold the manifests/);
    // Within the budget, everything is read.
    assert.equal((await readManifests([join(tmp.path, 'wide')], { maxFileBytes: 1024 * 1024, maxTotalBytes: Infinity, what: 'manifest', maxEntries: 200 })).documents.length, 60);
  });
});
