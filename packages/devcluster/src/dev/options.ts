/**
 * `portal dev` options: the flags dev owns, and everything else, which is
 * passed verbatim to every replica's `portal serve` (lease timings,
 * Alertmanager URLs, log level, …). Parsed by the product's own flag parser
 * (`parseArgs`, keeping what it does not know). Pure: no I/O, no process.
 */
import { parseArgs, parseDuration, type FlagDef } from 'portal/dev-api';

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

const OWNED: readonly FlagDef[] = [
  { flag: 'replicas', type: 'value' },
  { flag: 'policies', type: 'value' },
  { flag: 'state-dir', type: 'value' },
  { flag: 'port', type: 'value' },
  { flag: 'chart', type: 'value' },
  { flag: 'grace-period', type: 'value' },
  { flag: 'help', type: 'bool' },
];

/** The flags dev owns (everything else goes to the replicas). */
export const DEV_FLAGS: readonly string[] = OWNED.map((d) => d.flag);

export function parseDevArgs(argv: readonly string[], defaults: { chart: string; policies: string; stateDir: string }): ParsedDevArgs {
  const args = parseArgs(argv, OWNED, 'portal dev', [], 'keep');
  const problems = [...args.problems];
  const options: DevOptions = {
    replicas: 2,
    policies: args.values.get('policies')?.at(-1) ?? defaults.policies,
    stateDir: args.values.get('state-dir')?.at(-1) ?? defaults.stateDir,
    port: 6443,
    chart: args.values.get('chart')?.at(-1) ?? defaults.chart,
    gracePeriodMs: 10_000,
    passthrough: withoutReserved(argv, args.kept, problems),
    help: args.values.get('help')?.at(-1) === 'true',
  };
  // Every value is checked (each bad one reported); the last good one counts.
  for (const value of args.values.get('replicas') ?? []) {
    const n = Number(value);
    if (!Number.isInteger(n) || n < 1 || n > 20) problems.push(`--replicas ${JSON.stringify(value)}: give a whole number from 1 to 20`);
    else options.replicas = n;
  }
  for (const value of args.values.get('port') ?? []) {
    const n = Number(value);
    if (!Number.isInteger(n) || n < 0 || n > 65535) problems.push(`--port ${JSON.stringify(value)}: give a port from 0 to 65535`);
    else options.port = n;
  }
  for (const value of args.values.get('grace-period') ?? []) {
    const ms = parseDuration(value);
    if (ms === undefined || ms < 0) problems.push(`--grace-period ${JSON.stringify(value)}: give a duration like 10s or 500ms`);
    else options.gracePeriodMs = ms;
  }
  return { options, problems };
}

/**
 * Whether the replicas run with `--denial-events` (the last of
 * `--denial-events[=true|false]` wins): dev then gives them the chart's RBAC
 * as rendered with `denials.events=true`, as an install with that value would.
 */
export function replicasWriteDenialEvents(passthrough: readonly string[]): boolean {
  let on = false;
  for (const word of passthrough) {
    const m = /^--denial-events(?:=(.*))?$/.exec(word);
    if (m) on = m[1] === undefined || m[1] === 'true';
  }
  return on;
}

/** The words for the replicas (`kept`: where they are in argv), less the flags dev sets on them itself: each is reported, and the value after it dropped. */
function withoutReserved(argv: readonly string[], kept: readonly number[], problems: string[]): string[] {
  const out: string[] = [];
  let skip = -1;
  for (const i of kept) {
    const arg = argv[i] as string;
    if (i === skip) continue;
    const m = /^--([a-z0-9-]+)(=.*)?$/s.exec(arg);
    const name = m?.[1];
    if (m === null || name === undefined || !(RESERVED_REPLICA_FLAGS as readonly string[]).includes(name)) {
      out.push(arg);
      continue;
    }
    problems.push(`--${name} is set by portal dev on each replica; remove it`);
    // Skip its value too, so it is not reported as something else.
    if (m[2] === undefined && argv[i + 1] !== undefined && !(argv[i + 1] as string).startsWith('-')) skip = i + 1;
  }
  return out;
}
