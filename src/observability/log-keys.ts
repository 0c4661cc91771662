/**
 * Every structured log key Portal uses, in one place (docs/design.md §11: gatekeeper's
 * "every log key a constant"), so dashboards and queries do not drift from the
 * code. Never log a whole admission object: requests can carry Secrets.
 * test/architecture/log-keys.test.ts fails on a log field not named here.
 */
export const LogKey = {
  component: 'component',
  /** A part inside a component (a component's child logger): pino would otherwise repeat `component`. */
  subcomponent: 'subcomponent',
  uid: 'uid',
  operation: 'operation',
  kind: 'kind',
  namespace: 'namespace',
  name: 'name',
  decision: 'decision',
  rules: 'rules',
  /** Who made an admission request (`userInfo.username`), on a denial's line. */
  user: 'user',
  durationMs: 'durationMs',
  url: 'url',
  file: 'file',
  dir: 'dir',
  reason: 'reason',
  count: 'count',
  /** Log lines dropped because the log's reader fell behind (src/observability/log-output.ts). */
  droppedLines: 'droppedLines',
  /** The error object itself (pino's err serializer logs type, message, stack, cause); wrap throwables with toError. */
  error: 'err',
  signal: 'signal',
  /** A replica's identity (pod name) in leader election. */
  identity: 'identity',
  /** The leader Lease, as namespace/name. */
  lease: 'lease',
  /** The leader term's epoch (`leaseUid/transitions`) that fences writes. */
  epoch: 'epoch',
  /** The identity now holding the Lease, as observed. */
  leader: 'leader',
  /** The identity that held the Lease before the observed change. */
  previous: 'previous',
  /** The Lease holder named by a read, when it is not this replica. */
  holder: 'holder',
  /** An event's name: a leader event on the bus, or a Kubernetes Event object. */
  event: 'event',
  /** An audit action (mark, evict, …). */
  action: 'action',
  /** One PortalException: its namespace/name (or its rule-set key, PortalException/namespace/name). */
  exception: 'exception',
  /** Several PortalExceptions (e.g. those that expired). */
  exceptions: 'exceptions',
  /** One rule's key (a rule name, or namespace/name for a namespaced rule). */
  rule: 'rule',
  /** A work queue's name. */
  queue: 'queue',
  /** A work item's key in a queue (usually an object's namespace/name). */
  key: 'key',
  /** How many times a work item failed before it was dropped. */
  failures: 'failures',
  /** The attempt number of a retried operation (1 is the first). */
  attempt: 'attempt',
  /** How many attempts an operation made in all. */
  attempts: 'attempts',
  /** What a work queue did with a failed item (retried, dropped). */
  outcome: 'outcome',
  /** A count of objects (in a pass, an informer list, a leader's backlog). */
  objects: 'objects',
  /** A count of side effects still to do. */
  pending: 'pending',
  /** A count of PolicyReports held. */
  reports: 'reports',
  /** A count of reports marked for writing. */
  marked: 'marked',
  /** One PolicyReport's key (namespace, or the cluster report's name). */
  report: 'report',
  /** An API group/version (e.g. the report API in use). */
  api: 'api',
  /** A count of objects deleted. */
  deleted: 'deleted',
  /** Kinds whose audit started. */
  started: 'started',
  /** Kinds whose audit stopped. */
  stopped: 'stopped',
  /** A duration in seconds (a full audit pass). */
  seconds: 'seconds',
  /** An object's metadata.generation. */
  generation: 'generation',
  /** The generation a rule last compiled at (absent if it never did). */
  compiledGeneration: 'compiledGeneration',
  /** An informer's name (the resource it lists and watches). */
  informer: 'informer',
  /** How long a watch may stay silent before it is restarted, in ms. */
  staleAfterMs: 'staleAfterMs',
  /** The delay before the next retry, in ms. */
  retryInMs: 'retryInMs',
  /** A Kubernetes resourceVersion. */
  resourceVersion: 'resourceVersion',
  /** A ValidatingAdmissionPolicy's paramKind (its key in the param store). */
  paramKind: 'paramKind',
  /** Whether Portal runs inside a cluster (service account) or from a kubeconfig. */
  inCluster: 'inCluster',
  /** A CA certificate file's path. */
  caFile: 'caFile',
  /** The graceful shutdown period, in ms. */
  graceMs: 'graceMs',
  /** A manager runnable group (probes, webhook, informers, others, leader-only). */
  group: 'group',
  /** A count of informers. */
  informers: 'informers',
  /** A manager runnable's name. */
  runnable: 'runnable',
  /** A count of manager runnables. */
  runnables: 'runnables',
  /** The delay before a failed runnable restarts, in ms. */
  restartInMs: 'restartInMs',
  /** The evaluation deadline, in ms. */
  deadlineMs: 'deadlineMs',
  /** A child process's exit code. */
  code: 'code',
  /** A webhook's name in a webhook configuration. */
  webhook: 'webhook',
} as const;
export type LogKey = (typeof LogKey)[keyof typeof LogKey];
