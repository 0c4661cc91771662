// Kept instead of node:util parseArgs: unknown flags must reach the replicas verbatim with their values, which parseArgs (strict: false) splits into a boolean and a positional.
/**
 * `portal dev` options: the flags dev owns, and everything else, which is
 * passed verbatim to every replica's `portal serve` (lease timings,
 * Alertmanager URLs, log level, …). Pure: no I/O, no process.
 */
import { parseDuration } from '../../../../src/util/duration.ts';

export interface DevOptions {
  /** Number of `portal serve` replicas. @default 2 */
  replicas: number;
  /** Directory of rule manifests installed as PortalRule/PortalClusterRule objects. @default "policies" */
  policies: string;
  /** Where state.json, kubeconfig, certificates and replica logs go. @default ".portal/dev" */
  stateDir: string;
  /**
   * Loopback port of the API server. 6443 (kube-apiserver's) keeps
   * `.portal/dev/kubeconfig` stable across restarts; `0` picks a free port
   * (tests, several instances). @default 6443
   */
  port: number;
  /** Chart whose `webhook:` values build the ValidatingWebhookConfiguration. @default the package's charts/portal */
  chart: string;
  /** How long replicas get after SIGTERM before SIGKILL. @default 10000 */
  gracePeriodMs: number;
  /** Flags forwarded to every replica, in order. */
  passthrough: string[];
  help: boolean;
}

/** Flags dev sets on each replica itself: giving them to dev is a usage error. */
export const RESERVED_REPLICA_FLAGS = [
  'kubeconfig',
  'tls-cert-file',
  'tls-key-file',
  'self-signed',
  'webhook-port',
  'probes-port',
  'bind-address',
  'pod-name',
  'install-namespace',
] as const;

/** The namespace replicas run in, as in the chart's default release namespace. */
export const INSTALL_NAMESPACE = 'portal-system';

export const DEV_HELP = `Usage: portal dev [flags] [serve flags]

Run an embedded Kubernetes API server on loopback and N Portal replicas
against it, with the CRDs, the rules and the webhook configuration installed.

Flags:
  --replicas N          number of replicas (default 2)
  --policies DIR        rule manifests to install (default ./policies)
  --state-dir DIR       state.json, kubeconfig, certs and logs (default .portal/dev)
  --port PORT           API server port on 127.0.0.1, 0 = any free port (default 6443)
  --chart DIR           chart whose webhook values are used (default the bundled charts/portal)
  --grace-period DUR    time replicas get after SIGTERM before SIGKILL (default 10s)
  --help                show this help

Any other flag is passed to every replica's 'portal serve' (e.g. --lease-duration 5s,
--alertmanager-url http://127.0.0.1:9093, --log-level debug); see 'portal serve --help'.
Dev sets --kubeconfig, --tls-cert-file, --tls-key-file, --webhook-port, --probes-port,
--bind-address, --pod-name and --install-namespace on each replica itself.

Then: kubectl --kubeconfig .portal/dev/kubeconfig get pods -A
`;

export interface ParsedDevArgs {
  options: DevOptions;
  problems: string[];
}

/** The flags dev owns (everything else goes to the replicas). */
export const DEV_FLAGS: readonly string[] = ['replicas', 'policies', 'state-dir', 'port', 'chart', 'grace-period', 'help'];
const OWNED = new Set(DEV_FLAGS);

export function parseDevArgs(argv: readonly string[], defaults: { chart: string; policies: string; stateDir: string }): ParsedDevArgs {
  const problems: string[] = [];
  const options: DevOptions = {
    replicas: 2,
    policies: defaults.policies,
    stateDir: defaults.stateDir,
    port: 6443,
    chart: defaults.chart,
    gracePeriodMs: 10_000,
    passthrough: [],
    help: false,
  };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i] as string;
    const m = /^--([a-z0-9-]+)(?:=(.*))?$/s.exec(arg);
    const name = m?.[1];
    if (m === null || name === undefined || !OWNED.has(name)) {
      if (m && name && (RESERVED_REPLICA_FLAGS as readonly string[]).includes(name)) {
        problems.push(`--${name} is set by portal dev on each replica; remove it`);
        // Skip its value too, so it is not reported as something else.
        if (m[2] === undefined && argv[i + 1] !== undefined && !(argv[i + 1] as string).startsWith('-')) i++;
        continue;
      }
      options.passthrough.push(arg);
      continue;
    }
    if (name === 'help') {
      options.help = m[2] === undefined || m[2] === 'true';
      continue;
    }
    let value = m[2];
    if (value === undefined) {
      value = argv[i + 1];
      if (value === undefined || value.startsWith('--')) {
        problems.push(`flag --${name} needs a value: --${name} VALUE`);
        continue;
      }
      i++;
    }
    switch (name) {
      case 'replicas': {
        const n = Number(value);
        if (!Number.isInteger(n) || n < 1 || n > 20) problems.push(`--replicas ${JSON.stringify(value)}: give a whole number from 1 to 20`);
        else options.replicas = n;
        break;
      }
      case 'port': {
        const n = Number(value);
        if (!Number.isInteger(n) || n < 0 || n > 65535) problems.push(`--port ${JSON.stringify(value)}: give a port from 0 to 65535`);
        else options.port = n;
        break;
      }
      case 'grace-period': {
        const ms = parseDuration(value);
        if (ms === undefined || ms < 0) problems.push(`--grace-period ${JSON.stringify(value)}: give a duration like 10s or 500ms`);
        else options.gracePeriodMs = ms;
        break;
      }
      case 'policies':
        options.policies = value;
        break;
      case 'state-dir':
        options.stateDir = value;
        break;
      case 'chart':
        options.chart = value;
        break;
    }
  }
  return { options, problems };
}

