/**
 * Builds the frozen {@link ServeConfig} from defaults, environment, the
 * `--config` YAML file and flags (later wins), and validates it ONCE,
 * collecting every problem with what to do about it. Nothing here reads
 * `process`: the CLI passes argv-derived values, env and host name in.
 */
import { readFileSync, statSync } from 'node:fs';
import { dirname, isAbsolute, resolve } from 'node:path';
import { createSecureContext } from 'node:tls';
import { caBundleProblem } from './ca-bundle.ts';
import { formatDuration, parseDuration } from '../util/duration.ts';
import { DEFAULTS, SERVE_OPTIONS, type OptionSpec, type ServeConfig } from './options.ts';
import { VERDICTS } from '../policy/report-api.ts';
import { readBoundedFileSync } from './read-file.ts';
import { parseYamlDocument } from './yaml.ts';

export interface ConfigSources {
  /** Raw flag values keyed by flag name (from src/config/args.ts). */
  flags: ReadonlyMap<string, readonly string[]>;
  /** Path of the `--config` YAML file, if any. */
  configFile?: string;
  /** Environment (POD_NAME, POD_NAMESPACE, KUBECONFIG are read). */
  env: Readonly<Record<string, string | undefined>>;
  hostname: string;
  /** Relative paths on the command line are resolved against this. */
  cwd: string;
  /**
   * Checks the caller makes true itself and so skips: `portal dev` validates
   * the flags it passes through to its replicas before it has written their
   * certificates and kubeconfigs.
   */
  deferred?: ReadonlySet<'tls' | 'ruleSource'>;
}

export type ConfigResult = { ok: true; config: Readonly<ServeConfig> } | { ok: false; problems: string[] };

/** admissionregistration/v1: a webhook's timeoutSeconds is between 1 and 30. */
const MAX_WEBHOOK_TIMEOUT_MS = 30_000;

const PATH_KEYS = new Set<keyof ServeConfig>(['tlsCertFile', 'tlsKeyFile', 'clientCaFile', 'policies', 'kubeconfig']);
const byKey = new Map(SERVE_OPTIONS.map((o) => [o.key, o]));

export function loadServeConfig(src: ConfigSources): ConfigResult {
  const problems: string[] = [];
  // Keys whose given value was rejected: cross-field checks skip them rather
  // than report a confusing comparison against the default.
  const invalid = new Set<keyof ServeConfig>();
  const values: Record<string, unknown> = { ...DEFAULTS };
  values.exemptNamespaces = [...DEFAULTS.exemptNamespaces];
  values.alertmanagerUrl = [...DEFAULTS.alertmanagerUrl];
  values.reportStatusFilter = [...DEFAULTS.reportStatusFilter];
  values.exceptionNamespaces = [...DEFAULTS.exceptionNamespaces];

  // Environment (lowest precedence after the defaults).
  if (src.env.POD_NAMESPACE) values.installNamespace = src.env.POD_NAMESPACE;
  if (src.env.KUBECONFIG) values.kubeconfig = resolve(src.cwd, src.env.KUBECONFIG);
  values.podName = src.env.POD_NAME || src.hostname;

  // The YAML file.
  if (src.configFile !== undefined) {
    const path = resolve(src.cwd, src.configFile);
    const fromFile = readConfigFile(path, problems);
    for (const [key, raw] of Object.entries(fromFile)) {
      const spec = byKey.get(key as keyof ServeConfig);
      if (!spec) {
        problems.push(`${path}: unknown key "${key}"; valid keys are the flag names in camelCase (see 'portal serve --help')`);
        continue;
      }
      const v = coerce(spec, raw, `${path}: ${key}`, problems, false);
      if (v === undefined) invalid.add(spec.key);
      else values[spec.key] = PATH_KEYS.has(spec.key) && v !== '' ? resolve(dirname(path), v as string) : v;
    }
  }

  // Flags (highest precedence).
  for (const spec of SERVE_OPTIONS) {
    const raws = src.flags.get(spec.flag);
    if (!raws || raws.length === 0) continue;
    const raw = spec.type === 'list' ? raws.flatMap((r) => r.split(',')).filter((s) => s !== '') : raws[raws.length - 1];
    const v = coerce(spec, raw, `--${spec.flag}`, problems, true);
    if (v === undefined) invalid.add(spec.key);
    else values[spec.key] = PATH_KEYS.has(spec.key) && v !== '' && !isAbsolute(v as string) ? resolve(src.cwd, v as string) : v;
  }

  const config = values as unknown as ServeConfig;
  if (config.leaseNamespace === '') config.leaseNamespace = config.installNamespace;
  if (config.webhookMaxConnectionsPerPeer === 0) config.webhookMaxConnectionsPerPeer = Math.ceil(config.webhookMaxConnections / 2);
  if (!config.exemptNamespaces.includes(config.installNamespace)) config.exemptNamespaces.push(config.installNamespace);
  if (config.exceptionNamespaces.length === 0) config.exceptionNamespaces = [config.installNamespace];
  validate(config, invalid, problems, (src.env.KUBERNETES_SERVICE_HOST ?? '') !== '', src.deferred ?? new Set());
  if (problems.length > 0) return { ok: false, problems };
  Object.freeze(config.exemptNamespaces);
  Object.freeze(config.alertmanagerUrl);
  Object.freeze(config.reportStatusFilter);
  Object.freeze(config.exceptionNamespaces);
  return { ok: true, config: Object.freeze(config) };
}

/**
 * Largest `--config` file: every option with a long value is a few KiB, so
 * 1 MiB is generous and still far below what YAML parsing could not hold.
 */
const MAX_CONFIG_FILE_BYTES = 1024 * 1024;

function readConfigFile(path: string, problems: string[]): Record<string, unknown> {
  const read = readBoundedFileSync(path, { maxBytes: MAX_CONFIG_FILE_BYTES, what: 'config file' });
  if (!read.ok) {
    problems.push(`--config ${path}: ${read.message}; check the path`);
    return {};
  }
  const parsed = parseYamlDocument(read.bytes.toString('utf8'));
  if (!parsed.ok) {
    problems.push(`--config ${path}: ${parsed.message}; fix the file`);
    return {};
  }
  const doc = parsed.value;
  if (doc === null || doc === undefined) return {};
  if (typeof doc !== 'object' || Array.isArray(doc)) {
    problems.push(`--config ${path}: must be a YAML mapping of option: value`);
    return {};
  }
  return doc as Record<string, unknown>;
}

/** Converts a raw value (a flag string, or a YAML scalar/array) to the option's type, or records a problem. */
function coerce(spec: OptionSpec, raw: unknown, where: string, problems: string[], fromFlag: boolean): unknown {
  const bad = (what: string): undefined => {
    problems.push(`${where}: ${what}`);
    return undefined;
  };
  switch (spec.type) {
    case 'string':
      return typeof raw === 'string' ? raw : bad(`expected a string, got ${JSON.stringify(raw)}`);
    case 'enum':
      return typeof raw === 'string' && spec.values?.includes(raw)
        ? raw
        : bad(`expected one of ${spec.values?.join(', ')}, got ${JSON.stringify(raw)}`);
    case 'bool':
      if (typeof raw === 'boolean') return raw;
      if (fromFlag && (raw === 'true' || raw === 'false')) return raw === 'true';
      return bad(`expected true or false, got ${JSON.stringify(raw)}`);
    case 'int':
    case 'number': {
      const n = typeof raw === 'number' ? raw : typeof raw === 'string' && raw.trim() !== '' ? Number(raw) : NaN;
      if (!Number.isFinite(n) || (spec.type === 'int' && !Number.isInteger(n))) {
        return bad(`expected ${spec.type === 'int' ? 'an integer' : 'a number'}, got ${JSON.stringify(raw)}`);
      }
      if ((spec.min !== undefined && n < spec.min) || (spec.max !== undefined && n > spec.max)) {
        return bad(`${n} is out of range; use a value from ${spec.min} to ${spec.max}`);
      }
      return n;
    }
    case 'duration': {
      const ms = typeof raw === 'string' ? parseDuration(raw) : undefined;
      if (ms === undefined) return bad(`${JSON.stringify(raw)} is not a duration; write it like 500ms, 15s or 1m30s`);
      return ms;
    }
    case 'list': {
      const list = typeof raw === 'string' ? [raw] : raw;
      if (!Array.isArray(list) || !list.every((s) => typeof s === 'string')) {
        return bad(`expected a list of strings, got ${JSON.stringify(raw)}`);
      }
      return [...list];
    }
  }
}

function validate(
  c: ServeConfig,
  invalid: ReadonlySet<keyof ServeConfig>,
  problems: string[],
  inCluster: boolean,
  deferred: ReadonlySet<'tls' | 'ruleSource'>,
): void {
  // Cross-field rules. Type/range errors were already recorded by coerce().
  if (invalid.has('leaseDuration') || invalid.has('renewDeadline') || invalid.has('retryPeriod')) {
    // Reported already; comparing with a default would mislead.
  } else if (c.leaseDuration <= 0 || c.renewDeadline <= 0 || c.retryPeriod <= 0) {
    problems.push('--lease-duration, --renew-deadline and --retry-period must all be greater than 0');
  } else {
    // client-go's rule (docs/design.md §10.4): followers must not take over while the
    // leader may still be renewing, and a renewal needs room for retries.
    if (!(c.leaseDuration > c.renewDeadline)) {
      problems.push(
        `--lease-duration (${formatDuration(c.leaseDuration)}) must be greater than --renew-deadline (${formatDuration(c.renewDeadline)}); raise the lease duration or lower the deadline`,
      );
    }
    if (!(c.renewDeadline > 1.2 * c.retryPeriod)) {
      problems.push(
        `--renew-deadline (${formatDuration(c.renewDeadline)}) must be greater than 1.2 × --retry-period (${formatDuration(1.2 * c.retryPeriod)}); lower the retry period`,
      );
    }
  }
  if (c.auditInterval <= 0) problems.push('--audit-interval must be greater than 0 (e.g. 1h)');
  if (c.alertResendInterval <= 0) problems.push('--alert-resend-interval must be greater than 0 (e.g. 1h)');
  if (!invalid.has('reportFlush') && c.reportFlush <= 0) problems.push('--report-flush must be greater than 0 (e.g. 10s)');
  if (!invalid.has('reportStatusFilter')) {
    const unknown = c.reportStatusFilter.filter((s) => !(VERDICTS as readonly string[]).includes(s));
    if (unknown.length > 0) problems.push(`--report-status-filter: ${unknown.map((s) => JSON.stringify(s)).join(', ')} is not a result; use some of ${VERDICTS.join(', ')}`);
    else c.reportStatusFilter = VERDICTS.filter((v) => c.reportStatusFilter.includes(v));
  }
  // The API server waits at most 30 s for a webhook (timeoutSeconds ≤ 30):
  // an evaluation allowed to run longer would answer nobody.
  if (!invalid.has('evaluationTimeout') && (c.evaluationTimeout <= 0 || c.evaluationTimeout > MAX_WEBHOOK_TIMEOUT_MS)) {
    problems.push(
      `--evaluation-timeout (${formatDuration(c.evaluationTimeout)}) must be greater than 0 and at most 30s (the API server's longest webhook timeout); use about 40% of the webhook's timeoutSeconds, e.g. 2s for 5s`,
    );
  }

  if (!invalid.has('webhookTimeout')) checkWebhookTimeout(c.webhookTimeout, problems);
  if (!invalid.has('readinessErrorMaxAge') && c.readinessErrorMaxAge <= 0) {
    problems.push('--readiness-error-max-age must be greater than 0 (e.g. 60s): internal errors must age out, or a replica taken out of its Service would never come back');
  }
  if (!invalid.has('webhookMaxConnections') && !invalid.has('webhookMaxConnectionsPerPeer') && c.webhookMaxConnectionsPerPeer > c.webhookMaxConnections) {
    problems.push(
      `--webhook-max-connections-per-peer (${c.webhookMaxConnectionsPerPeer}) must not be greater than --webhook-max-connections (${c.webhookMaxConnections}); lower it, or raise the cap`,
    );
  }

  if (c.webhookPort !== 0 && c.webhookPort === c.probesPort && !invalid.has('webhookPort') && !invalid.has('probesPort')) {
    problems.push(`--webhook-port and --probes-port are both ${c.webhookPort}; give them different ports`);
  }

  if (!deferred.has('tls')) checkTls(c, problems);
  if (!deferred.has('ruleSource')) checkRuleSource(c, problems, inCluster);

  const dns1123 = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
  for (const ns of [...c.exemptNamespaces, ...c.exceptionNamespaces, c.installNamespace, c.leaseNamespace]) {
    if (!dns1123.test(ns) || ns.length > 63) {
      problems.push(`"${ns}" is not a valid namespace name (lowercase letters, digits and '-', at most 63)`);
    }
  }
  if (c.leaseName === '') problems.push('--lease-name must not be empty');
  if (c.podName === '') problems.push('the replica has no name: set POD_NAME or --pod-name');

  for (const u of c.alertmanagerUrl) {
    let ok: boolean;
    try {
      ok = ['http:', 'https:'].includes(new URL(u).protocol);
    } catch {
      ok = false;
    }
    if (!ok) problems.push(`--alertmanager-url ${JSON.stringify(u)} is not an http(s) URL; write it like http://alertmanager:9093`);
  }
}

function checkTls(c: ServeConfig, problems: string[]): void {
  if ((c.tlsCertFile === '') !== (c.tlsKeyFile === '')) {
    problems.push('--tls-cert-file and --tls-key-file go together; give both (or neither with --self-signed)');
  } else if (c.tlsCertFile === '' && !c.selfSigned) {
    problems.push('no serving certificate: give --tls-cert-file and --tls-key-file, or --self-signed for local use');
  } else if (c.tlsCertFile !== '' && c.selfSigned) {
    problems.push('--self-signed conflicts with --tls-cert-file/--tls-key-file; drop one of them');
  }
  let readable = c.tlsCertFile !== '' && c.tlsKeyFile !== '';
  for (const [flag, file] of [['--tls-cert-file', c.tlsCertFile], ['--tls-key-file', c.tlsKeyFile]] as const) {
    if (file !== '' && !checkPath(flag, file, 'file', problems)) readable = false;
  }
  if (readable) checkKeyPair(c.tlsCertFile, c.tlsKeyFile, problems);
  if (c.clientCaFile !== '' && checkPath('--client-ca-file', c.clientCaFile, 'file', problems)) checkClientCa(c.clientCaFile, problems);
}

/** `--webhook-timeout` is a webhook configuration's timeoutSeconds, which admissionregistration/v1 allows from 1 to 30. */
function checkWebhookTimeout(ms: number, problems: string[]): void {
  if (ms < 1_000 || ms > MAX_WEBHOOK_TIMEOUT_MS) {
    problems.push(`--webhook-timeout (${formatDuration(ms)}) must be from 1s to 30s: it is the webhook configuration's timeoutSeconds (admissionregistration/v1 allows 1 to 30)`);
  }
}

function checkClientCa(file: string, problems: string[]): void {
  let pem: string;
  try {
    pem = readFileSync(file, 'utf8');
  } catch (err) {
    problems.push(`--client-ca-file ${file}: cannot read it (${(err as NodeJS.ErrnoException).code ?? String(err)})`);
    return;
  }
  const problem = caBundleProblem(pem);
  if (problem !== undefined) problems.push(`--client-ca-file ${file}: ${problem}`);
}

/**
 * Loads the pair the way the webhook will, so a file that is not PEM or a key
 * that does not belong to the certificate is a configuration error now, not a
 * crash when the server starts.
 */
function checkKeyPair(certFile: string, keyFile: string, problems: string[]): void {
  let cert: string;
  let key: string;
  try {
    cert = readFileSync(certFile, 'utf8');
    key = readFileSync(keyFile, 'utf8');
  } catch (err) {
    problems.push(`--tls-cert-file/--tls-key-file: cannot read them (${(err as NodeJS.ErrnoException).code ?? String(err)})`);
    return;
  }
  const before = problems.length;
  if (!cert.includes('-----BEGIN CERTIFICATE-----')) {
    problems.push(`--tls-cert-file ${certFile}: holds no PEM certificate (a "-----BEGIN CERTIFICATE-----" block); give the certificate file`);
  }
  if (!/-----BEGIN [A-Z ]*PRIVATE KEY-----/.test(key)) {
    problems.push(`--tls-key-file ${keyFile}: holds no PEM private key (a "-----BEGIN ... PRIVATE KEY-----" block); give the key file`);
  }
  if (problems.length > before) return;
  try {
    createSecureContext({ cert, key });
  } catch (err) {
    const message = (err as Error).message;
    problems.push(
      /key values mismatch/i.test(message)
        ? `--tls-key-file ${keyFile} is not the private key of the certificate in --tls-cert-file ${certFile}; give the matching key`
        : `--tls-cert-file ${certFile} / --tls-key-file ${keyFile}: cannot be used for TLS (${message.replace(/^error:[0-9A-F]+:/, '')})`,
    );
  }
}

function checkRuleSource(c: ServeConfig, problems: string[], inCluster: boolean): void {
  if (c.policies !== '') {
    checkPath('--policies', c.policies, 'directory', problems);
    if (c.denialEvents) problems.push('--denial-events writes Events to the cluster: it needs cluster mode (--kubeconfig, or in a pod), not --policies');
  } else if (c.kubeconfig === '') {
    // In a pod (KUBERNETES_SERVICE_HOST set) cluster mode uses the service account.
    if (!inCluster) problems.push('no rule source: give --policies DIR (rules from files) or --kubeconfig FILE (rules from the cluster)');
  } else checkPath('--kubeconfig', c.kubeconfig, 'file', problems);
}

/** Records a problem and returns false when `path` is not a readable file/directory. */
function checkPath(flag: string, path: string, want: 'file' | 'directory', problems: string[]): boolean {
  try {
    const st = statSync(path);
    if (want === 'file' ? !st.isFile() : !st.isDirectory()) {
      problems.push(`${flag} ${path}: not a ${want}`);
      return false;
    }
    return true;
  } catch (err) {
    problems.push(`${flag} ${path}: cannot read it (${(err as NodeJS.ErrnoException).code ?? String(err)}); check the path`);
    return false;
  }
}

/** `--help` text generated from the schema. */
export function serveHelp(): string {
  const lines = ['Usage: portal serve [flags]', '', 'Run one Portal replica.', '', 'Flags:'];
  const rows: [string, string][] = [
    ['--config FILE', 'YAML file with the same keys in camelCase (flags win)'],
    ...SERVE_OPTIONS.map((o): [string, string] => [
      `--${o.flag}${o.type === 'bool' ? '[=false]' : ` ${o.arg ?? 'VALUE'}`}`,
      `${o.help} (default ${describeDefault(o)})`,
    ]),
    ['--help', 'show this help'],
  ];
  const width = Math.max(...rows.map(([f]) => f.length)) + 2;
  for (const [f, h] of rows) lines.push(`  ${f.padEnd(width)}${h}`);
  lines.push('', 'Environment: POD_NAME, POD_NAMESPACE, KUBECONFIG.', '');
  return lines.join('\n');
}

function describeDefault(o: OptionSpec): string {
  switch (o.key) {
    case 'kubeconfig':
      return '$KUBECONFIG';
    case 'installNamespace':
      return `$POD_NAMESPACE or ${DEFAULTS.installNamespace}`;
    case 'podName':
      return '$POD_NAME or the host name';
    case 'leaseNamespace':
    case 'exceptionNamespaces':
      return 'the install namespace';
    case 'maxExceptionLifetime':
      return 'none';
    case 'webhookMaxConnectionsPerPeer':
      return `half of --webhook-max-connections, ${Math.ceil(DEFAULTS.webhookMaxConnections / 2)}`;
  }
  const v = DEFAULTS[o.key];
  if (o.type === 'duration') return formatDuration(v as number);
  if (Array.isArray(v)) return v.length ? v.join(',') : 'none';
  return v === '' ? 'none' : String(v);
}
