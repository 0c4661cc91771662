/**
 * Bad input to `portal serve|test|dev` is reported at once, with what to do,
 * exit code 2, no stack trace, and nothing started (real executable).
 */
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, mkdirSync, rmSync, truncateSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { writeSelfSigned } from '../../src/admission/certs.ts';
import { assertReported, runPortal } from './portal.ts';

let dir: string;
const path = (...p: string[]): string => join(dir, ...p);
const rule = (name: string, kind: string, schema: string, extra = ''): string =>
  `apiVersion: portal.dev/v1alpha1
kind: PortalClusterRule
metadata:
  name: ${name}
spec:
  enforcement: Deny
  match:
    kinds:
      - apiGroups: [""]
        kinds: [${kind}]
  validate:
    message: m
    schema:
${schema}
${extra}`;

before(async () => {
  dir = mkdtempSync(join(tmpdir(), 'portal-robust-'));
  mkdirSync(path('rules'));
  writeFileSync(path('rules', 'ok.yaml'), rule('ok', 'Pod', '      type: object'));
  mkdirSync(path('bad-rules'));
  writeFileSync(path('bad-rules', 'a.yaml'), rule('bad-schema', 'Pod', '      type: objekt'));
  writeFileSync(path('bad-rules', 'b.yaml'), rule('backref', 'Pod', '      type: object\n      properties: { name: { type: string, pattern: "^(a)\\\\1$" } }'));
  writeFileSync(path('bad-rules', 'c.yaml'), rule('bad-action', 'Pod', '      type: object', '  audit:\n    actions:\n      - type: explode\n'));
  writeFileSync(path('bad-rules', 'd.yaml'), rule('evict-deploy', 'Deployment', '      type: object', '  audit:\n    actions:\n      - type: evict\n'));
  mkdirSync(path('recursive'));
  writeFileSync(
    path('recursive', 'r.yaml'),
    rule('recursive', 'ConfigMap', '      $defs:\n        node: { type: object, additionalProperties: { $ref: "#/$defs/node" } }\n      type: object\n      properties: { data: { $ref: "#/$defs/node" } }'),
  );
  // Deep enough to overflow the stack in a recursive schema, were it evaluated.
  let deep = '{}';
  for (let i = 0; i < 50_000; i++) deep = `{"a":${deep}}`;
  writeFileSync(path('deep.json'), `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"deep"},"data":${deep}}`);
  writeFileSync(path('pod.yaml'), 'apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {containers: [{name: c, image: "nginx:1"}]}\n');
  writeFileSync(path('empty.yaml'), '# nothing here\n');
  mkdirSync(path('no-manifests'));
  writeFileSync(path('no-manifests', 'README.txt'), 'hello\n');
  writeFileSync(path('binary.yaml'), Buffer.from([0x7f, 0x45, 0x4c, 0x46, 0x02, 0x01, 0x00, 0x00, 0xff, 0xfe]));
  writeFileSync(path('latin1.yaml'), Buffer.from('name: caf\xe9\n', 'latin1'));
  writeFileSync(path('huge.yaml'), '');
  truncateSync(path('huge.yaml'), 17 * 1024 * 1024);
  writeFileSync(path('bad.yaml'), 'webhookPort: abc\nfoo: 1\nleaseDuration: 5\nselfSigned: "yes"\n');
  writeFileSync(path('syntax.yaml'), 'a: [\n');
  writeFileSync(path('garbage.pem'), 'not pem\n');
  mkdirSync(path('pair-a'));
  mkdirSync(path('pair-b'));
  await writeSelfSigned(path('pair-a'));
  await writeSelfSigned(path('pair-b'));
});
after(() => rmSync(dir, { recursive: true, force: true }));

const SERVE_OK = () => ['--self-signed', '--policies', path('rules'), '--webhook-port', '0', '--probes-port', '0'];

describe('portal serve: configuration errors exit 2 before anything starts', { concurrency: 3 }, () => {
  it('an unknown flag takes no value, names the closest flag, and the word after it is explained once', async () => {
    const r = await runPortal(['serve', '--polices', 'x', '--self-signed']);
    assertReported(r, 2, /unknown flag --polices \(did you mean --policies\?\); "x" after it was not taken as its value/, /no rule source/);
    if (/unexpected argument/.test(r.stderr)) throw new Error(`"x" reported twice:\n${r.stderr}`);
  });

  it('a flag missing its value at the end', async () => {
    assertReported(await runPortal(['serve', ...SERVE_OK(), '--webhook-port']), 2, /flag --webhook-port needs a value/);
  });

  it('bad ports and durations, all at once', async () => {
    const r = await runPortal(['serve', ...SERVE_OK(), '--webhook-port', '-1', '--probes-port', '70000', '--audit-workers', 'abc', '--lease-duration', '5', '--renew-deadline', '10x']);
    assertReported(
      r,
      2,
      /--webhook-port: -1 is out of range; use a value from 0 to 65535/,
      /--probes-port: 70000 is out of range/,
      /--audit-workers: expected an integer, got "abc"/,
      /--lease-duration: "5" is not a duration; write it like 500ms, 15s or 1m30s/,
      /--renew-deadline: "10x" is not a duration/,
    );
  });

  it('inconsistent lease timings', async () => {
    const r = await runPortal(['serve', ...SERVE_OK(), '--lease-duration', '5s', '--renew-deadline', '10s', '--retry-period', '9s']);
    assertReported(r, 2, /--lease-duration \(5s\) must be greater than --renew-deadline \(10s\)/, /1\.2 × --retry-period/);
  });

  it('--config: missing file, bad YAML, unknown keys and wrong types name the file and key', async () => {
    assertReported(await runPortal(['serve', ...SERVE_OK(), '--config', path('missing.yaml')]), 2, /--config .*missing\.yaml: cannot read: no such file or directory; check the path/);
    assertReported(await runPortal(['serve', ...SERVE_OK(), '--config', path('syntax.yaml')]), 2, /--config .*syntax\.yaml: invalid YAML at line 2, column 1: .*; fix the file/);
    assertReported(
      await runPortal(['serve', ...SERVE_OK(), '--config', path('bad.yaml')]),
      2,
      /bad\.yaml: webhookPort: expected an integer, got "abc"/,
      /bad\.yaml: unknown key "foo"/,
      /bad\.yaml: leaseDuration: 5 is not a duration/,
      /bad\.yaml: selfSigned: expected true or false, got "yes"/,
    );
  });

  it('TLS files: missing, not PEM, and a key that does not match the certificate', async () => {
    const base = ['serve', '--policies', path('rules'), '--webhook-port', '0', '--probes-port', '0'];
    assertReported(await runPortal([...base, '--tls-cert-file', path('nope.crt'), '--tls-key-file', path('nope.key')]), 2, /--tls-cert-file .*nope\.crt: cannot read it \(ENOENT\)/, /--tls-key-file .*nope\.key: cannot read it/);
    assertReported(
      await runPortal([...base, '--tls-cert-file', path('garbage.pem'), '--tls-key-file', path('garbage.pem')]),
      2,
      /--tls-cert-file .*garbage\.pem: holds no PEM certificate/,
      /--tls-key-file .*garbage\.pem: holds no PEM private key/,
    );
    assertReported(
      await runPortal([...base, '--tls-cert-file', path('pair-a', 'tls.crt'), '--tls-key-file', path('pair-b', 'tls.key')]),
      2,
      /--tls-key-file .*pair-b\/tls\.key is not the private key of the certificate in --tls-cert-file .*pair-a\/tls\.crt/,
    );
  });

  it('invalid rules: every one named, with its nested problems indented under it', async () => {
    const r = await runPortal(['serve', '--self-signed', '--policies', path('bad-rules'), '--webhook-port', '0', '--probes-port', '0']);
    assertReported(
      r,
      2,
      /a\.yaml: PortalClusterRule "bad-schema" is invalid:\n {6}- spec\.validate\.schema: compilation failed/,
      /b\.yaml: PortalClusterRule "backref" is invalid:\n {6}- .*backreferences .* not supported/,
      /c\.yaml: .*\n {6}- spec\.audit\.actions\[0\]\.type: must be one of/,
      /d\.yaml: .*\n {6}- spec\.audit\.actions\[0\]: evict only applies to Pods/,
    );
  });
});

describe('portal dev: usage errors exit 2 before the API server starts', { concurrency: 3 }, () => {
  it('--replicas 0 / abc', async () => {
    assertReported(await runPortal(['dev', '--replicas', '0', '--port', '0', '--state-dir', path('dev-a')]), 2, /--replicas "0": give a whole number from 1 to 20/);
    assertReported(await runPortal(['dev', '--replicas', 'abc', '--port', '0', '--state-dir', path('dev-a')]), 2, /--replicas "abc"/);
  });

  it('an unknown flag suggests the nearest of dev\'s own and serve\'s flags, and points to dev\'s help once (issue 15 item 5)', async () => {
    const state = path('dev-c');
    const r = await runPortal(['dev', '--replica', '3', '--port', '0', '--state-dir', state]);
    assertReported(r, 2);
    assert.equal(r.stderr, `portal dev: unknown flag --replica (did you mean --replicas?); "3" after it was not taken as its value; run 'portal dev --help' for the list\n`);
    const typo = await runPortal(['dev', '--state-dri', state, '--port', '0']);
    assertReported(typo, 2, /unknown flag --state-dri \(did you mean --state-dir\?\)/);
    if (existsSync(state)) throw new Error('portal dev created its state directory although the flags were bad');
  });

  it('a missing --policies path is named as --policies', async () => {
    const r = await runPortal(['dev', '--policies', path('no-such-rules'), '--port', '0', '--state-dir', path('dev-d')]);
    assertReported(r, 2, /^portal dev: --policies .*no-such-rules: no such directory$/m);
  });

  it('flags passed through to the replicas are checked first', async () => {
    const state = path('dev-b');
    const r = await runPortal(['dev', '--policies', path('rules'), '--port', '0', '--state-dir', state, '--polices', 'x', '--lease-duration', '5']);
    assertReported(r, 2, /unknown flag --polices \(did you mean --policies\?\)/, /--lease-duration: "5" is not a duration/);
    if (existsSync(state)) throw new Error('portal dev created its state directory although the flags were bad');
  });
});

describe('portal test: bad input', { concurrency: 3 }, () => {
  const t = (...args: string[]) => runPortal(['test', ...args], dir);

  it('a missing --policies path is named as --policies', async () => {
    assertReported(await t('--policies', 'no-such-rules', 'pod.yaml'), 2, /^ {2}- --policies no-such-rules: cannot read: no such file or directory$/m);
  });

  it('a truncated flag is completed, an unknown command gets the nearest command', async () => {
    assertReported(await t('--pod-security', 'v1.30', '--policies', 'rules', 'pod.yaml'), 2, /unknown flag --pod-security \(did you mean --pod-security-version\?\)/);
    assertReported(await runPortal(['tset'], dir), 2, /^portal: unknown command "tset" \(did you mean 'portal test'\?\)$/m);
  });

  it('an unknown flag explains that its value became a FILE argument', async () => {
    assertReported(await t('--polices', 'rules', 'pod.yaml'), 2, /unknown flag --polices \(did you mean --policies\?\); "rules" after it was not taken as its value/, /--policies DIR is required/);
  });

  it('a FILE that does not exist, an empty file, a directory without manifests', async () => {
    assertReported(await t('--policies', 'rules', 'nope.yaml'), 2, /nope\.yaml: cannot read: no such file or directory/);
    assertReported(await t('--policies', 'rules', 'empty.yaml'), 2, /\(empty\.yaml\) hold no Kubernetes objects: they are empty or hold only comments/);
    assertReported(await t('--policies', 'rules', 'no-manifests'), 2, /no-manifests: directory holds no \.yaml, \.yml or \.json files/);
  });

  it('binary, non-UTF-8 and oversized files are named as such', async () => {
    assertReported(
      await t('--policies', 'rules', 'binary.yaml', 'latin1.yaml', 'huge.yaml'),
      2,
      /binary\.yaml: is a binary file \(it contains NUL bytes\), not YAML or JSON/,
      /latin1\.yaml: is not UTF-8 text/,
      /huge\.yaml: file is 17\.0 MiB, over the 16\.0 MiB limit for a manifest; split it/,
    );
  });

  it('invalid rules are reported, nothing is evaluated', async () => {
    assertReported(await t('--policies', 'bad-rules', 'pod.yaml'), 2, /"bad-schema" is invalid/, /"backref" is invalid/, /"bad-action" is invalid/, /"evict-deploy" is invalid/, /Nothing was evaluated/);
  });

  it('an object nested past the bound is bad input named with its file, not a stack overflow in a recursive schema', async () => {
    // It used to reach the rule and overflow the stack in its recursive
    // schema (an error verdict, exit 1); nesting is now bounded while the
    // file is read (issue 16 item 5, src/config/yaml.ts), as at admission.
    const r = await t('--policies', 'recursive', '--output', 'json', 'deep.json');
    assertReported(r, 2, /deep\.json: nested deeper than 200 levels at line 1/);
    assert.equal(r.stdout, '');
  });
});
