import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { writeSelfSigned } from '../../src/admission/certs.ts';
import { parseArgs } from '../../src/config/args.ts';
import { formatDuration, parseDuration } from '../../src/util/duration.ts';
import { loadServeConfig, serveHelp } from '../../src/config/load.ts';
import { SERVE_OPTIONS } from '../../src/config/options.ts';

const defs = [...SERVE_OPTIONS.map((o) => ({ flag: o.flag, type: o.type === 'bool' ? ('bool' as const) : ('value' as const) })), { flag: 'config', type: 'value' as const }];

describe('Go-style durations', () => {
  it('parses and rejects like time.ParseDuration', () => {
    assert.equal(parseDuration('500ms'), 500);
    assert.equal(parseDuration('15s'), 15_000);
    assert.equal(parseDuration('1m30s'), 90_000);
    assert.equal(parseDuration('1.5h'), 5_400_000);
    assert.equal(parseDuration('0'), 0);
    for (const bad of ['', '15', 's', '1x', '1m 30s', '-1s', '1.2.3s']) assert.equal(parseDuration(bad), undefined, bad);
    assert.equal(formatDuration(90_000), '1m30s');
    assert.equal(formatDuration(3_600_000), '1h');
  });
});

describe('loadServeConfig', () => {
  let dir: string;
  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'portal-config-'));
    // A real pair: the configuration loads it the way the webhook will.
    await writeSelfSigned(dir);
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  const load = (argv: string[], env: Record<string, string> = {}) => {
    const args = parseArgs(argv, defs);
    assert.deepEqual(args.problems, []);
    const configFile = args.values.get('config')?.at(-1);
    return loadServeConfig({ flags: args.values, ...(configFile ? { configFile } : {}), env, hostname: 'host-1', cwd: dir });
  };

  it('fills defaults and the environment, adds the install namespace to the exemptions, and freezes the result', () => {
    const r = load(['--policies', '.', '--self-signed'], { POD_NAMESPACE: 'portal', POD_NAME: 'portal-0' });
    assert.ok(r.ok);
    const c = r.config;
    assert.equal(c.webhookPort, 9443);
    assert.equal(c.probesPort, 8080);
    assert.equal(c.leaseDuration, 15_000);
    assert.equal(c.renewDeadline, 10_000);
    assert.equal(c.retryPeriod, 2_000);
    assert.equal(c.auditInterval, 3_600_000);
    assert.equal(c.installNamespace, 'portal');
    assert.equal(c.leaseNamespace, 'portal');
    assert.equal(c.podName, 'portal-0');
    assert.equal(c.policies, dir);
    assert.deepEqual(c.exemptNamespaces, ['kube-system', 'kube-public', 'kube-node-lease', 'portal']);
    assert.ok(Object.isFrozen(c) && Object.isFrozen(c.exemptNamespaces));
    assert.throws(() => {
      (c as { webhookPort: number }).webhookPort = 1;
    });
  });

  it('--evaluation-timeout and --webhook-max-connections: derived defaults, bounds checked (issue 9)', () => {
    const ok = load(['--policies', '.', '--self-signed']);
    assert.ok(ok.ok);
    assert.equal(ok.config.evaluationTimeout, 2_000);
    assert.equal(ok.config.webhookMaxConnections, 512);
    const set = load(['--policies', '.', '--self-signed', '--evaluation-timeout', '12s', '--webhook-max-connections', '64']);
    assert.ok(set.ok);
    assert.equal(set.config.evaluationTimeout, 12_000);
    assert.equal(set.config.webhookMaxConnections, 64);
    for (const bad of ['0s', '31s']) {
      const r = load(['--policies', '.', '--self-signed', '--evaluation-timeout', bad]);
      assert.ok(!r.ok);
      assert.match(r.problems.join('\n'), /--evaluation-timeout \(.*\) must be greater than 0 and at most 30s \(the API server's longest webhook timeout\)/);
    }
    const r = load(['--policies', '.', '--self-signed', '--webhook-max-connections', '0']);
    assert.ok(!r.ok);
    assert.match(r.problems.join('\n'), /--webhook-max-connections: 0 is out of range; use a value from 1 to 65535/);
  });

  it('issue 16: the per-peer limit defaults to half the cap; the readiness error age must be positive', () => {
    const ok = load(['--policies', '.', '--self-signed']);
    assert.ok(ok.ok);
    assert.equal(ok.config.webhookMaxConnectionsPerPeer, 256);
    assert.equal(ok.config.readinessErrorMaxAge, 60_000);
    assert.equal(ok.config.clientCaFile, '');
    const small = load(['--policies', '.', '--self-signed', '--webhook-max-connections', '65']);
    assert.ok(small.ok);
    assert.equal(small.config.webhookMaxConnectionsPerPeer, 33);
    const set = load(['--policies', '.', '--self-signed', '--webhook-max-connections-per-peer', '10', '--readiness-error-max-age', '5s']);
    assert.ok(set.ok);
    assert.equal(set.config.webhookMaxConnectionsPerPeer, 10);
    assert.equal(set.config.readinessErrorMaxAge, 5_000);
    const bad = load(['--policies', '.', '--self-signed', '--webhook-max-connections', '64', '--webhook-max-connections-per-peer', '65', '--readiness-error-max-age', '0s']);
    assert.ok(!bad.ok);
    assert.match(bad.problems.join('\n'), /--webhook-max-connections-per-peer \(65\) must not be greater than --webhook-max-connections \(64\)/);
    assert.match(bad.problems.join('\n'), /--readiness-error-max-age must be greater than 0/);
  });

  it('issue 16: --client-ca-file must be a readable bundle holding a CA certificate', () => {
    const ok = load(['--policies', '.', '--self-signed', '--client-ca-file', 'ca.crt']);
    assert.ok(ok.ok, JSON.stringify(!ok.ok && ok.problems));
    assert.equal(ok.config.clientCaFile, join(dir, 'ca.crt'));
    writeFileSync(join(dir, 'not-pem.txt'), 'hello');
    const missing = load(['--policies', '.', '--self-signed', '--client-ca-file', 'nope.crt']);
    assert.ok(!missing.ok);
    assert.match(missing.problems.join('\n'), /--client-ca-file .*nope\.crt: cannot read it \(ENOENT\)/);
    const notPem = load(['--policies', '.', '--self-signed', '--client-ca-file', 'not-pem.txt']);
    assert.ok(!notPem.ok);
    assert.match(notPem.problems.join('\n'), /--client-ca-file .*not-pem\.txt: holds no PEM certificate/);
    // The serving certificate is not a CA: every client would be refused.
    const leaf = load(['--policies', '.', '--self-signed', '--client-ca-file', 'tls.crt']);
    assert.ok(!leaf.ok);
    assert.match(leaf.problems.join('\n'), /--client-ca-file .*tls\.crt: holds no CA certificate/);
  });

  it('reads a YAML file with camelCase keys, flags win over it', () => {
    writeFileSync(
      join(dir, 'portal.yaml'),
      'webhookPort: 10443\nleaseDuration: 3s\nrenewDeadline: 2s\nretryPeriod: 500ms\nalertmanagerUrl: [http://am-1:9093, http://am-2:9093]\ntlsCertFile: tls.crt\ntlsKeyFile: tls.key\npolicies: .\n',
    );
    const r = load(['--config', 'portal.yaml', '--webhook-port', '11443', '--alertmanager-url', 'http://am-3:9093']);
    assert.ok(r.ok, JSON.stringify(!r.ok && r.problems));
    assert.equal(r.config.webhookPort, 11443);
    assert.equal(r.config.leaseDuration, 3000);
    assert.equal(r.config.retryPeriod, 500);
    assert.deepEqual(r.config.alertmanagerUrl, ['http://am-3:9093']);
    assert.equal(r.config.tlsCertFile, join(dir, 'tls.crt'));
  });

  it('reports every problem at once, each saying what to do', () => {
    writeFileSync(join(dir, 'bad.yaml'), 'webhookPort: "https"\nleaseDurationSeconds: 15\nauditWorkers: 0\n');
    const r = load([
      '--config', 'bad.yaml',
      '--probes-port', '70000',
      '--lease-duration', '5s',
      '--renew-deadline', '10s',
      '--retry-period', 'soon',
      '--log-level', 'loud',
      '--leader-elect=maybe',
      '--tls-cert-file', 'missing.crt',
      '--alertmanager-url', 'am:9093',
      '--exempt-namespace', 'Bad_NS',
    ]);
    assert.equal(r.ok, false);
    const text = !r.ok ? r.problems.join('\n') : '';
    for (const re of [
      /bad\.yaml: webhookPort: expected an integer/,
      /unknown key "leaseDurationSeconds"/,
      /auditWorkers: 0 is out of range; use a value from 1/,
      /--probes-port: 70000 is out of range/,
      /--retry-period: "soon" is not a duration; write it like 500ms/,
      /--log-level: expected one of trace, debug/,
      /--leader-elect: expected true or false/,
      /--tls-cert-file and --tls-key-file go together/,
      /missing\.crt: cannot read it \(ENOENT\)/,
      /"am:9093" is not an http\(s\) URL/,
      /"Bad_NS" is not a valid namespace name/,
    ]) {
      assert.match(text, re);
    }
    // The lease check is skipped because --retry-period was invalid (no misleading comparison).
    assert.doesNotMatch(text, /1\.2 ×/);
  });

  it('checks the election timings like client-go', () => {
    const r = load(['--policies', '.', '--self-signed', '--lease-duration', '10s', '--renew-deadline', '10s', '--retry-period', '9s']);
    assert.equal(r.ok, false);
    const text = !r.ok ? r.problems.join('\n') : '';
    assert.match(text, /--lease-duration \(10s\) must be greater than --renew-deadline \(10s\)/);
    assert.match(text, /--renew-deadline \(10s\) must be greater than 1\.2 × --retry-period \(10\.8s\)/);
  });

  it('requires a certificate source and a rule source', () => {
    const r = load([]);
    assert.equal(r.ok, false);
    const text = !r.ok ? r.problems.join('\n') : '';
    assert.match(text, /no serving certificate: give --tls-cert-file and --tls-key-file, or --self-signed/);
    assert.match(text, /no rule source: give --policies DIR/);
  });

  it('--denial-events: off by default; it writes to the cluster, so files mode refuses it', () => {
    const plain = load(['--policies', '.', '--self-signed']);
    assert.ok(plain.ok && plain.config.denialEvents === false);
    const r = load(['--policies', '.', '--self-signed', '--denial-events']);
    assert.equal(r.ok, false);
    assert.match(!r.ok ? r.problems.join('\n') : '', /--denial-events writes Events to the cluster: it needs cluster mode \(--kubeconfig, or in a pod\), not --policies/);
  });

  it('generates --help from the schema', () => {
    const help = serveHelp();
    for (const o of SERVE_OPTIONS) assert.ok(help.includes(`--${o.flag}`), o.flag);
    assert.match(help, /--lease-duration DUR .*\(default 15s\)/);
  });
});

describe('parseArgs', () => {
  it('collects unknown flags with a suggestion and missing values', () => {
    const r = parseArgs(['--webhook-prot', '1', '--policies', '--self-signed', '--', '--x'], defs, 'portal serve');
    assert.deepEqual(r.problems, [
      `unknown flag --webhook-prot (did you mean --webhook-port?); "1" after it was not taken as its value; run 'portal serve --help' for the list`,
      'flag --policies needs a value: --policies VALUE',
    ]);
    assert.deepEqual(r.positionals, ['1', '--x']);
    assert.deepEqual(r.values.get('self-signed'), ['true']);
  });
});
