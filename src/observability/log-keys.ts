/**
 * Every structured log key Portal uses, in one place (STYLE.md: gatekeeper's
 * "every log key a constant"), so dashboards and queries do not drift from the
 * code. Never log a whole admission object: requests can carry Secrets.
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
  durationMs: 'durationMs',
  url: 'url',
  file: 'file',
  dir: 'dir',
  reason: 'reason',
  count: 'count',
  error: 'err',
  signal: 'signal',
} as const;
export type LogKey = (typeof LogKey)[keyof typeof LogKey];
