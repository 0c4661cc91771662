/**
 * `portal serve` configuration: ONE interface (with `@default`), ONE defaults
 * object and ONE schema table. Flags, the `--config` YAML file (same keys,
 * camelCase) and `--help` are all generated from {@link SERVE_OPTIONS}.
 *
 * Durations are milliseconds here; on the command line and in YAML they are
 * Go-style strings (`500ms`, `15s`, `1m30s`).
 */
import { availableParallelism } from 'node:os';
import type { LogLevel } from '../observability/logger.ts';
import { REPORT_APIS, REPORT_GRANULARITIES, type ReportApi, type ReportGranularity } from '../policy/report-api.ts';
import type { Verdict } from '../policy/types.ts';

/** Namespaces the webhook never matches and the server never evaluates, so the control plane can always recover (docs/design.md §3). */
export const ALWAYS_EXCLUDED_NAMESPACES = ['kube-system', 'kube-public', 'kube-node-lease'] as const;

export interface ServeConfig {
  /** HTTPS port of the admission webhook (`0` picks a free port). @default 9443 */
  webhookPort: number;
  /** Plain-HTTP port for /healthz, /livez, /readyz, /metrics, /debug/vars. @default 8080 */
  probesPort: number;
  /** Address both servers bind to. @default "0.0.0.0" */
  bindAddress: string;
  /** PEM certificate file of the webhook; reloaded when it changes. @default "" */
  tlsCertFile: string;
  /** PEM private key file of the webhook; reloaded when it changes. @default "" */
  tlsKeyFile: string;
  /** Generate a throw-away CA and serving certificate (local use only). @default false */
  selfSigned: boolean;
  /** Directory of rule manifests (file mode: no cluster needed). @default "" */
  policies: string;
  /** kubeconfig file (cluster mode: rules from PortalRule objects). @default $KUBECONFIG or "" */
  kubeconfig: string;
  /** Namespaces never evaluated (the install namespace is always added). @default ["kube-system","kube-public","kube-node-lease"] */
  exemptNamespaces: string[];
  /** Namespace Portal is installed in. @default $POD_NAMESPACE or "portal-system" */
  installNamespace: string;
  /**
   * The ValidatingWebhookConfiguration that sends requests to Portal, read to
   * show in each rule's Covered condition whether its kinds are sent ("": not
   * checked). The chart passes its own. @default ""
   */
  webhookConfiguration: string;
  /** This replica's name (election identity prefix). @default $POD_NAME or the host name */
  podName: string;
  /** Log level. @default "info" */
  logLevel: LogLevel;
  /** Take part in leader election (false = lead alone, single replica). @default true */
  leaderElect: boolean;
  /** Name of the election Lease. @default "portal-leader" */
  leaseName: string;
  /** Namespace of the election Lease. @default the install namespace */
  leaseNamespace: string;
  /** How long followers wait after the last observed renewal. @default 15s */
  leaseDuration: number;
  /** How long the leader keeps retrying to renew before it gives up. @default 10s */
  renewDeadline: number;
  /** Interval between election attempts. @default 2s */
  retryPeriod: number;
  /** Interval between full audit passes. @default 1h */
  auditInterval: number;
  /** Audit worker pool size. @default 4 */
  auditWorkers: number;
  /** Cluster-wide cap on evictions started by the audit. @default 10 */
  maxEvictionsPerMinute: number;
  /** Alertmanager base URLs (repeatable). @default [] */
  alertmanagerUrl: string[];
  /** Re-send interval of a still-firing alert. @default 1h */
  alertResendInterval: number;
  /** Sustained rate of Kubernetes API writes. @default 20 */
  kubeApiQps: number;
  /** Burst of Kubernetes API writes. @default 40 */
  kubeApiBurst: number;
  /** API of the reports the leader writes (adr/0012). @default "openreports" */
  reportApi: ReportApi;
  /** One report per object, or one per namespace plus one for the cluster (adr/0012). @default "namespace" */
  reportGranularity: ReportGranularity;
  /** Coalescing window: each report is written at most once per interval. @default 10s */
  reportFlush: number;
  /** Write budget of the reports (writes per second, separate from --kube-api-qps). @default 10 */
  reportQps: number;
  /** Namespace granularity: most results a report lists. @default 100 */
  reportMaxResults: number;
  /** Namespace granularity: the results a report lists (the summary counts all). @default ["fail","warn","error"] */
  reportStatusFilter: Verdict[];
  /** Bound on graceful shutdown before the process stops anyway. @default 20s */
  shutdownGracePeriod: number;
  /** Time budget of one admission evaluation; past it the remaining matched rules give `error` (a denial). @default 2s */
  evaluationTimeout: number;
  /** Open webhook connections per replica; at the cap an idle one is closed to make room, else the new one is. @default 512 */
  webhookMaxConnections: number;
  /**
   * The webhook configuration's timeoutSeconds: how long the API server waits
   * for an answer. A request's headers and body must arrive within it
   * (src/admission/limits.ts derives every bound from it). @default 10s
   */
  webhookTimeout: number;
  /**
   * Namespaces whose PortalExceptions may exempt objects in any namespace and
   * cluster-scoped objects (others exempt only objects in their own
   * namespace). @default the install namespace
   */
  exceptionNamespaces: string[];
  /** PortalExceptions that never expire, or expire longer than this after their creation, are refused; 0 = no limit. @default 0 */
  maxExceptionLifetime: number;
  /** Open webhook connections from one remote address; more are closed at once. 0 when given: half of `webhookMaxConnections`. @default half of webhookMaxConnections (256) */
  webhookMaxConnectionsPerPeer: number;
  /** CA bundle (PEM) that signs the API server's client certificate; when set, clients without one are refused at the TLS handshake. Reloaded when it changes. @default "" */
  clientCaFile: string;
  /** Internal errors older than this stop counting against /readyz. @default 60s */
  readinessErrorMaxAge: number;
  /**
   * Worker threads that evaluate admission requests (adr/0013); the audit has
   * one more of its own. @default the available cores, at least 2 and at most 8 (DEFAULT_EVALUATION_WORKERS)
   */
  evaluationWorkers: number;
  /**
   * Heap (V8 old generation, MiB) of each evaluation thread; past it the
   * thread is replaced and the rule it was running gives `error` for that
   * object (adr/0018). 0: derived from the replica's memory
   * (src/evaluation/thread-memory.ts). @default 0
   */
  evaluationMemory: number;
  /**
   * Directory for what a replica keeps across its own restarts: the (rule,
   * object) pairs that exhausted an evaluation thread's memory (adr/0018).
   * "": kept in memory only. The chart mounts an emptyDir. @default ""
   */
  evaluationStateDir: string;
  /**
   * Write a Warning Event (reason PortalDenied) on each denied object, in its
   * namespace, aggregated like the API server's Events (src/audit/denial-events.ts).
   * Cluster mode only. @default false
   */
  denialEvents: boolean;
}

/** The CPUs this process may run on (its affinity: a replica pinned to one core sees 1). */
export const AVAILABLE_CPUS = availableParallelism();

/**
 * Two workers at least, so that one rule stuck until the deadline in one
 * worker leaves another to answer everyone else; one per core beyond that
 * (the main thread mostly does TLS and parsing), and no more than 8: each
 * holds its own compiled copy of every rule (tens of MB), and a replica that
 * needs more cores is better scaled out.
 */
export const DEFAULT_EVALUATION_WORKERS = Math.min(8, Math.max(2, AVAILABLE_CPUS));

export type OptionType = 'int' | 'number' | 'string' | 'bool' | 'duration' | 'list' | 'enum';

export interface OptionSpec {
  key: keyof ServeConfig;
  /** Flag name without the leading `--`. */
  flag: string;
  type: OptionType;
  /** One line for `--help`. */
  help: string;
  /** Placeholder in `--help` (e.g. `DIR`). */
  arg?: string;
  min?: number;
  max?: number;
  values?: readonly string[];
}

/** The defaults that do not depend on the environment. */
export const DEFAULTS: Readonly<ServeConfig> = Object.freeze({
  webhookPort: 9443,
  probesPort: 8080,
  bindAddress: '0.0.0.0',
  tlsCertFile: '',
  tlsKeyFile: '',
  selfSigned: false,
  policies: '',
  kubeconfig: '',
  exemptNamespaces: Object.freeze([...ALWAYS_EXCLUDED_NAMESPACES]) as unknown as string[],
  installNamespace: 'portal-system',
  webhookConfiguration: '',
  podName: '',
  logLevel: 'info',
  leaderElect: true,
  leaseName: 'portal-leader',
  leaseNamespace: '',
  // client-go's defaults (docs/design.md §4: 15 s / 10 s / 2 s).
  leaseDuration: 15_000,
  renewDeadline: 10_000,
  retryPeriod: 2_000,
  auditInterval: 3_600_000,
  auditWorkers: 4,
  maxEvictionsPerMinute: 10,
  alertmanagerUrl: Object.freeze([]) as unknown as string[],
  alertResendInterval: 3_600_000,
  // client-go's default rest.Config is 5 qps / 10 burst; the audit writes
  // reports and statuses in bursts after a pass, so 4x that, still far below
  // the apiserver's default max-mutating-requests-inflight of 200.
  kubeApiQps: 20,
  kubeApiBurst: 40,
  reportApi: 'openreports',
  reportGranularity: 'namespace',
  // Coalescing: a namespace report takes every change of its objects in one
  // write per 10 s (a Deployment rollout is one or two writes, not one per
  // Pod), and a changed object shows in its report within 10 s.
  reportFlush: 10_000,
  // Half of --kube-api-qps, on a budget of its own: a first pass of 100
  // namespace reports takes ~10 s, and a report backlog never takes tokens
  // from status, labels, evictions or the ledger (adr/0012).
  reportQps: 10,
  // 100 results of ≤ ~1.5 KiB (message clipped to 1 KiB) stay below 150 KiB
  // per report, a tenth of etcd's 1.5 MiB object limit, and fit a screen of
  // \`kubectl get\` output an operator actually reads.
  reportMaxResults: 100,
  reportStatusFilter: Object.freeze(['fail', 'warn', 'error']) as unknown as Verdict[],
  // A Pod's default terminationGracePeriodSeconds is 30 s; 20 s leaves 10 s
  // for the kubelet's SIGKILL margin and log flushing.
  shutdownGracePeriod: 20_000,
  // 40% of the chart's webhook timeoutSeconds (5 s): an evaluation that hits
  // the budget still leaves 3 s for the request queued behind it and for the
  // transfer both ways, so the API server gets Portal's denial (naming the
  // rule) instead of a timeout. The chart passes 40% of its own value.
  evaluationTimeout: 2_000,
  // Two API servers' worth: each has at most 200 mutating requests in flight
  // (--max-mutating-requests-inflight), each holding one connection to the
  // webhook, plus client-go's 25 idle keep-alive connections (2 × 225 < 512).
  webhookMaxConnections: 512,
  // The API server's default timeoutSeconds, for a hand-written webhook
  // configuration that names none; the chart and `portal dev` pass theirs (5 s).
  webhookTimeout: 10_000,
  // Empty: the install namespace (resolved in load.ts), where only Portal's administrators write.
  exceptionNamespaces: Object.freeze([]) as unknown as string[],
  maxExceptionLifetime: 0,
  // 0 = half of webhookMaxConnections (resolved in load.ts): one API server
  // needs at most ~225 (above), and half the cap leaves the other half to
  // the other API servers whatever one peer does.
  webhookMaxConnectionsPerPeer: 0,
  clientCaFile: '',
  // Twelve periods of the chart's readiness probe (src/admission/readiness.ts).
  readinessErrorMaxAge: 60_000,
  evaluationWorkers: DEFAULT_EVALUATION_WORKERS,
  evaluationMemory: 0,
  evaluationStateDir: '',
  // Off: an Event per denial is an API write per denied object (bounded, but
  // not free); the denial's log line and metrics are always there.
  denialEvents: false,
});

const PORT = { min: 0, max: 65535 } as const;

export const SERVE_OPTIONS: readonly OptionSpec[] = [
  { key: 'webhookPort', flag: 'webhook-port', type: 'int', ...PORT, arg: 'PORT', help: 'HTTPS port of the admission webhook' },
  { key: 'probesPort', flag: 'probes-port', type: 'int', ...PORT, arg: 'PORT', help: 'HTTP port of /healthz /livez /readyz /metrics /debug/vars' },
  { key: 'bindAddress', flag: 'bind-address', type: 'string', arg: 'ADDR', help: 'address both servers listen on' },
  { key: 'tlsCertFile', flag: 'tls-cert-file', type: 'string', arg: 'FILE', help: 'PEM certificate of the webhook (reloaded on change)' },
  { key: 'tlsKeyFile', flag: 'tls-key-file', type: 'string', arg: 'FILE', help: 'PEM private key of the webhook (reloaded on change)' },
  { key: 'selfSigned', flag: 'self-signed', type: 'bool', help: 'generate a throw-away CA and certificate (local use only)' },
  { key: 'policies', flag: 'policies', type: 'string', arg: 'DIR', help: 'load rules from manifests in DIR (no cluster needed)' },
  { key: 'kubeconfig', flag: 'kubeconfig', type: 'string', arg: 'FILE', help: 'kubeconfig of the cluster (env KUBECONFIG)' },
  { key: 'exemptNamespaces', flag: 'exempt-namespace', type: 'list', arg: 'NS', help: 'namespace never evaluated (repeatable or comma-separated)' },
  { key: 'installNamespace', flag: 'install-namespace', type: 'string', arg: 'NS', help: 'namespace Portal runs in (env POD_NAMESPACE), always exempt' },
  { key: 'webhookConfiguration', flag: 'webhook-configuration', type: 'string', arg: 'NAME', help: "webhook configuration sending requests to Portal, for the rules' Covered condition" },
  { key: 'podName', flag: 'pod-name', type: 'string', arg: 'NAME', help: 'replica name (env POD_NAME, else the host name)' },
  { key: 'logLevel', flag: 'log-level', type: 'enum', values: ['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent'], arg: 'LEVEL', help: 'log level' },
  { key: 'leaderElect', flag: 'leader-elect', type: 'bool', help: 'take part in leader election (false: lead alone)' },
  { key: 'leaseName', flag: 'lease-name', type: 'string', arg: 'NAME', help: 'name of the election Lease' },
  { key: 'leaseNamespace', flag: 'lease-namespace', type: 'string', arg: 'NS', help: 'namespace of the election Lease' },
  { key: 'leaseDuration', flag: 'lease-duration', type: 'duration', arg: 'DUR', help: 'followers take over this long after the last renewal' },
  { key: 'renewDeadline', flag: 'renew-deadline', type: 'duration', arg: 'DUR', help: 'leader gives up renewing after this long' },
  { key: 'retryPeriod', flag: 'retry-period', type: 'duration', arg: 'DUR', help: 'interval between election attempts' },
  { key: 'auditInterval', flag: 'audit-interval', type: 'duration', arg: 'DUR', help: 'interval between full audit passes' },
  { key: 'auditWorkers', flag: 'audit-workers', type: 'int', min: 1, max: 256, arg: 'N', help: 'audit worker pool size' },
  { key: 'maxEvictionsPerMinute', flag: 'max-evictions-per-minute', type: 'int', min: 0, max: 100_000, arg: 'N', help: 'cap on audit evictions (0 disables evictions)' },
  { key: 'alertmanagerUrl', flag: 'alertmanager-url', type: 'list', arg: 'URL', help: 'Alertmanager base URL (repeatable)' },
  { key: 'alertResendInterval', flag: 'alert-resend-interval', type: 'duration', arg: 'DUR', help: 're-send interval of a firing alert' },
  { key: 'kubeApiQps', flag: 'kube-api-qps', type: 'number', min: 0.001, max: 100_000, arg: 'QPS', help: 'sustained Kubernetes API write rate' },
  { key: 'kubeApiBurst', flag: 'kube-api-burst', type: 'int', min: 1, max: 100_000, arg: 'N', help: 'burst of Kubernetes API writes' },
  { key: 'reportApi', flag: 'report-api', type: 'enum', values: REPORT_APIS, arg: 'API', help: 'report API: openreports (openreports.io) or wgpolicyk8s (wgpolicyk8s.io)' },
  { key: 'reportGranularity', flag: 'report-granularity', type: 'enum', values: REPORT_GRANULARITIES, arg: 'G', help: 'one report per resource, or per namespace (+ one cluster report)' },
  { key: 'reportFlush', flag: 'report-flush', type: 'duration', arg: 'DUR', help: 'each report is written at most once per interval (coalescing)' },
  { key: 'reportQps', flag: 'report-qps', type: 'number', min: 0.01, max: 100_000, arg: 'QPS', help: 'write budget of the reports (separate from --kube-api-qps)' },
  { key: 'reportMaxResults', flag: 'report-max-results', type: 'int', min: 0, max: 1000, arg: 'N', help: 'namespace granularity: most results listed per report' },
  { key: 'reportStatusFilter', flag: 'report-status-filter', type: 'list', arg: 'RESULTS', help: 'namespace granularity: results listed (pass,fail,warn,error,skip)' },
  { key: 'shutdownGracePeriod', flag: 'shutdown-grace-period', type: 'duration', arg: 'DUR', help: 'bound on graceful shutdown' },
  { key: 'webhookMaxConnections', flag: 'webhook-max-connections', type: 'int', min: 1, max: 65_535, arg: 'N', help: 'open webhook connections per replica (more are closed at once)' },
  { key: 'webhookMaxConnectionsPerPeer', flag: 'webhook-max-connections-per-peer', type: 'int', min: 0, max: 65_535, arg: 'N', help: 'open webhook connections from one remote address (more are closed at once)' },
  { key: 'webhookTimeout', flag: 'webhook-timeout', type: 'duration', arg: 'DUR', help: "the webhook configuration's timeoutSeconds: requests must arrive within it (1s to 30s)" },
  { key: 'clientCaFile', flag: 'client-ca-file', type: 'string', arg: 'FILE', help: 'require API server client certificates signed by this CA (reloaded on change)' },
  { key: 'readinessErrorMaxAge', flag: 'readiness-error-max-age', type: 'duration', arg: 'DUR', help: 'internal errors older than this stop counting against /readyz' },
  { key: 'exceptionNamespaces', flag: 'exception-namespaces', type: 'list', arg: 'NS', help: 'namespaces whose PortalExceptions may exempt objects anywhere (repeatable or comma-separated)' },
  { key: 'maxExceptionLifetime', flag: 'max-exception-lifetime', type: 'duration', arg: 'DUR', help: 'refuse PortalExceptions that never expire or live longer (0: no limit)' },
  { key: 'evaluationTimeout', flag: 'evaluation-timeout', type: 'duration', arg: 'DUR', help: 'deadline of one evaluation: past it the rules not decided give error (a rule still running is abandoned)' },
  { key: 'evaluationWorkers', flag: 'evaluation-workers', type: 'int', min: 1, max: 64, arg: 'N', help: 'worker threads evaluating admission requests (default: cores, 2 to 8)' },
  { key: 'evaluationMemory', flag: 'evaluation-memory', type: 'int', min: 0, max: 65_536, arg: 'MIB', help: "heap of each evaluation thread, MiB; past it the rule gives error for that object (0: from the replica's memory)" },
  { key: 'evaluationStateDir', flag: 'evaluation-state-dir', type: 'string', arg: 'DIR', help: 'directory kept across restarts: objects that exhausted an evaluation thread\'s memory ("": none)' },
  { key: 'denialEvents', flag: 'denial-events', type: 'bool', help: 'write a PortalDenied Event on each denied object, aggregated (cluster mode)' },
];

/** Flags that are not configuration keys. */
export const META_FLAGS = [
  { flag: 'config', type: 'string' as const, arg: 'FILE', help: 'YAML file with the same keys in camelCase (flags win)' },
  { flag: 'help', type: 'bool' as const, help: 'show this help' },
];
